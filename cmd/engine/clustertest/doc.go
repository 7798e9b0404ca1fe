// Package clustertest holds tests of a clustered deployment of the real
// binaries (three nats-server processes, engine nodes) under faults.
package clustertest
