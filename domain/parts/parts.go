// Package parts is how a state hands engine/snapshot the lists that grow
// with its history, and how it takes them back: a pure aggregate implements
// snapshot.Parted with these types without importing the bucket's client.
package parts

// List is one of a state's lists as the state's SnapshotParts took it, in
// the aggregate's mailbox: Items is a slice ([]T) whose elements never
// change once appended, capped at its length, so that it may be encoded
// elsewhere while the state goes on; it holds the list's elements from
// index Base on among all the list ever held (the state dropped those
// before Base; Base only grows). Name is a key token: letters and digits.
type List struct {
	Name  string
	Base  int
	Items any
}

// Joined is one list read back from a snapshot: its elements from index
// Base on, as JSON arrays (Parts) to be decoded and joined in order.
type Joined struct {
	Name  string
	Base  int
	Parts [][]byte
}
