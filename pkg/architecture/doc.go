// Package architecture holds no code: its test checks the module's layers —
// each package imports only packages of lower layers — and that every
// package's documentation names exactly the packages of this module it
// imports (docs/architecture.md).
//
// It imports nothing of this module.
package architecture
