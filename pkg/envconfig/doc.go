// Package envconfig holds environment configuration (SPEC §3 check 4, §5
// step `config`): what an environment gives every deploy to it — a default
// target, parameters, rollback defaults, its regions — and the descriptor
// policy that says which of them a deploy descriptor may override.
//
// A Provider reads the configuration valid now for an application in an
// environment and names its Revision: Files reads a directory of YAML files
// (<dir>/<environment>.yaml, deep-merged with <dir>/<environment>/<application>.yaml),
// HTTP asks a configuration service for JSON, with ETag caching. A provider
// that cannot be reached answers an error matching ErrUnavailable, so the
// server can accept the deploy and leave the check to the worker. Defaults
// adds the server-wide settings (the default descriptor policy, whether
// every environment must be configured); FromConfig builds it from the
// `environments` and `descriptor_policy` keys of manent-server.yaml.
//
// Merge combines a descriptor with its environment's configuration into the
// Effective deploy, or refuses it with one *manent.Error (EInvalid) listing
// every conflict, parameter not allowed or missing target by JSON path.
//
// docs/environments.md describes the files, the JSON, the policy and the
// merge rules for operators.
//
// The package imports descriptor, pkg/egress, pkg/manent, pkg/plugin (what
// counts as a credential in a target's `with`), pkg/regularfile (the
// files' bounded reading), pkg/urlpolicy and
// pkg/yamlvalue (the YAML reading descriptors use too) of this module, and
// gopkg.in/yaml.v3 from outside it; it knows nothing of HTTP routes, storage
// or the engine.
package envconfig
