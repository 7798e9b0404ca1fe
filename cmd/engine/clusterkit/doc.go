// Package clusterkit starts a clustered deployment on loopback ports for tests
// of the real binaries: three nats-server processes in one JetStream cluster
// (StartNATS) and engine nodes against them (StartEngine). Every process logs
// to a file in its directory and is killed when the test ends.
//
// Binaries are built from this module: NATSBinary (go.mod's nats-server
// version, cached on disk) and EngineBinary (./cmd/engine, once per process).
package clusterkit
