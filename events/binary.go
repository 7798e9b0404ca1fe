package events

import (
	"fmt"

	"github.com/tinylib/msgp/msgp"
)

// The MessagePack form of a commit, which the engine writes: a map with the
// JSON form's field names,
//
//	{"id": str, "key": str (left out when empty), "principal": map, "at": timestamp,
//	 "events": [{"type": str, "data": map}, ...]}
//
// where each event's data is the map msgp generates for its type, under its
// JSON field names, decimals as their JSON text and times as MessagePack
// timestamps (read back in UTC). Any MessagePack reader can take it apart;
// msgp.UnmarshalAsJSON turns one into JSON. Unknown fields are skipped, so a
// field can be added without a new event version.

func (r Registry) encodeMsg(b []byte, c Commit) ([]byte, error) {
	fields := uint32(4)
	if c.Key != "" {
		fields++
	}
	if b == nil {
		b = make([]byte, 0, 128+384*len(c.Events))
	}
	b = msgp.AppendMapHeader(b, fields)
	b = msgp.AppendString(b, "id")
	b = msgp.AppendString(b, c.CommandID)
	if c.Key != "" {
		b = msgp.AppendString(b, "key")
		b = msgp.AppendString(b, c.Key)
	}
	b = msgp.AppendString(b, "principal")
	b, err := c.Principal.MarshalMsg(b)
	if err != nil {
		return nil, fmt.Errorf("encode commit: %w", err)
	}
	b = msgp.AppendString(b, "at")
	b = msgp.AppendTimeExt(b, c.At)
	b = msgp.AppendString(b, "events")
	b = msgp.AppendArrayHeader(b, uint32(len(c.Events)))
	for _, e := range c.Events {
		b = msgp.AppendMapHeader(b, 2)
		b = msgp.AppendString(b, "type")
		b = msgp.AppendString(b, e.Type())
		b = msgp.AppendString(b, "data")
		if b, err = r[e.Type()].appendMsg(b, e); err != nil {
			return nil, fmt.Errorf("encode %s: %w", e.Type(), err)
		}
	}
	return b, nil
}

func (r Registry) decodeMsg(b []byte) (Commit, error) {
	var c Commit
	n, b, err := msgp.ReadMapHeaderBytes(b)
	for ; err == nil && n > 0; n-- {
		var k []byte
		if k, b, err = msgp.ReadMapKeyZC(b); err != nil {
			break
		}
		switch string(k) {
		case "id":
			c.CommandID, b, err = msgp.ReadStringBytes(b)
		case "key":
			c.Key, b, err = msgp.ReadStringBytes(b)
		case "principal":
			b, err = c.Principal.UnmarshalMsg(b)
		case "at":
			c.At, b, err = msgp.ReadTimeUTCBytes(b)
		case "events":
			c.Events, b, err = r.decodeMsgEvents(b)
		default:
			b, err = msgp.Skip(b)
		}
	}
	if err == nil && len(b) > 0 {
		err = errTrailing
	}
	if err != nil {
		return Commit{}, fmt.Errorf("decode commit: %w", err)
	}
	return c, nil
}

func (r Registry) decodeMsgEvents(b []byte) ([]Event, []byte, error) {
	n, b, err := msgp.ReadArrayHeaderBytes(b)
	if err != nil {
		return nil, b, err
	}
	if int(n) > len(b) { // each event takes at least a byte: a bad header must not allocate
		return nil, b, msgp.ErrShortBytes
	}
	out := make([]Event, 0, n)
	for range n {
		var fields uint32
		if fields, b, err = msgp.ReadMapHeaderBytes(b); err != nil {
			return nil, b, err
		}
		var typ, data []byte
		var e Event
		for ; fields > 0; fields-- {
			var k []byte
			if k, b, err = msgp.ReadMapKeyZC(b); err != nil {
				return nil, b, err
			}
			switch {
			case string(k) == "type":
				typ, b, err = msgp.ReadStringZC(b)
			case string(k) == "data" && typ != nil: // the type came first, as encodeMsg writes it: one pass
				e, b, err = r.decodeMsgEvent(typ, b)
			case string(k) == "data":
				rest, serr := msgp.Skip(b)
				data, b, err = b[:len(b)-len(rest)], rest, serr
			default:
				b, err = msgp.Skip(b)
			}
			if err != nil {
				return nil, b, err
			}
		}
		if e == nil {
			if e, data, err = r.decodeMsgEvent(typ, data); err == nil && len(data) > 0 {
				err = fmt.Errorf("%s: %w", typ, errTrailing)
			}
			if err != nil {
				return nil, b, err
			}
		}
		out = append(out, e)
	}
	return out, b, nil
}

// decodeMsgEvent reads the data of an event of type typ from the start of b.
func (r Registry) decodeMsgEvent(typ, b []byte) (Event, []byte, error) {
	f, ok := r[string(typ)]
	if !ok {
		return nil, b, fmt.Errorf("%s: %w", typ, ErrUnknownType)
	}
	if f.msg == nil {
		return nil, b, fmt.Errorf("%s: the type has no MessagePack code", typ)
	}
	e, rest, err := f.msg(b)
	if err != nil {
		return nil, b, fmt.Errorf("%s: %w", typ, err)
	}
	return e, rest, nil
}
