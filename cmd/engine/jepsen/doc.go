// Package jepsen tests a clustered deployment the way Jepsen does: real
// processes (three nats-servers in one R3 JetStream cluster, engine nodes
// and the read models' PostgreSQL), each in a network namespace of its own
// joined by a bridge, under a nemesis that kills, pauses, partitions and
// slows them, while clients record every invocation and completion;
// checkers then judge the history.
//
// The parts, each in its file:
//   - net.go: the namespaces, the bridge and the addresses the harness
//     assigns (169.254.X.0/24, link-local, X picked per run); the faults the
//     kernel allows (blackhole routes for partitions, one-way ones included,
//     a link set down, rate limits and random loss with tc); cleanup, and a
//     sweep of what a dead run left.
//   - cluster.go, proc.go: the processes, built from this module
//     (clusterkit), started through `ip netns exec`.
//   - pg.go: the read models' PostgreSQL, the run's own (initdb into the
//     run's directory, the server as the postgres user in a namespace of
//     its own), which every engine's DATABASE_URL names.
//   - nemesis.go: the fault kinds and a seeded schedule of them.
//   - workload.go, history.go: the clients and what they saw.
//   - model.go, check.go: the porcupine models and the invariants.
//   - provider.go: linked provider accounts (the Binance simulator, run
//     on the bridge's root address, reachable from every namespace whatever
//     the partitions), their clients and the exchange's count of each
//     clientOrderId as the checker (TestProviderFaults).
//   - proxy.go: the deliberately broken deployment, a NATS proxy that takes
//     the fencing headers off every publish, which the checkers must catch.
//
// Tests need root and `ip netns`; without them they skip and say why.
package jepsen
