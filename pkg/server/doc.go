// Package server is manent-server's HTTP API (SPEC §7): submission with
// the checks of SPEC §3, reads, cancel, inventory, health and metrics.
// Every error is application/problem+json; every route is authenticated
// and authorised.
//
// It imports pkg/manent, pkg/api (wire types), pkg/engine, pkg/store,
// pkg/plan and descriptor.
package server
