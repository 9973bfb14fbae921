// Package descriptor holds the deploy descriptor (deploy.yml, SPEC §2): its
// Go types, the embedded JSON Schema, and parsing that reports the errors
// at once (the first 100) with their JSON path and YAML line:column. Parsing
// is linear in the input, whatever it holds (SPEC §11.1).
//
// It imports only pkg/manent, pkg/cronspec, pkg/yamlvalue (the one YAML
// reading, shared with environment configuration files) and pkg/suggest
// (the one "did you mean") of this module.
package descriptor
