// Package descriptor holds the deploy descriptor (deploy.yml, SPEC §2): its
// Go types, the embedded JSON Schema, and parsing that reports every error at
// once with its JSON path and YAML line:column.
//
// It imports only pkg/manent and pkg/cronspec of this module.
package descriptor
