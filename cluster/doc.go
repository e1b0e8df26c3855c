// Package cluster replicates docket through github.com/hashicorp/raft.
package cluster
