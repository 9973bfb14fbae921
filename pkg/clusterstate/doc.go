// Package clusterstate holds what manent knows about a Kubernetes cluster
// from its agent (SPEC §9): the snapshot the agent reports — pods and
// workloads labelled by manent — with its validation and limits, the state
// of each workload against the deploy that declared it (DEPLOYING until
// observed matches declared, DRIFTED when the deploy has ended and another
// version runs), and the decision of a deploy step that waits
// on the cluster: ready, failed naming up to five pods, or still waiting,
// with a notice when the agent has gone quiet.
//
// Attribution is by the manent.io/deploy-id label only: what is said about
// one deploy's objects never decides another deploy's step.
//
// It imports pkg/manent only. The agent (pkg/agent), the store, the HTTP
// server and client (pkg/server, pkg/api) and the cluster-ready step plugin
// depend on it; it knows nothing of Kubernetes client libraries.
package clusterstate
