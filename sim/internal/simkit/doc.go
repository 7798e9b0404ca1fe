// Package simkit is what the simulators (sim/binance, sim/tradovate) share beside their protocols:
// serving and stopping (Server), the control API's plumbing (Handle, HandleBody, Durations), the
// injected faults' list (Faults), the stream faults and the WebSocket outbox (StreamFaults,
// Reorder, Outbox) and the raw HTTP moves (RemoteIP, DropConnection). A simulator keeps all of its
// state behind one mutex; the types here that hold state say which of their methods run under it.
package simkit
