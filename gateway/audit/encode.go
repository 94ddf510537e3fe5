package audit

import (
	"encoding/json"
	"strconv"

	"github.com/utcpd/utcpd/internal/jsonx"
)

// AppendJSON appends r's JSON encoding to b, byte for byte what
// json.Marshal(r) writes, and returns the extended slice. Stores encode a
// record per call (the data column), so the usual record (plain ASCII
// strings, no Diff) is written directly, without encoding/json's
// reflection and its allocations; any other record is handed to
// json.Marshal, whose error is returned.
func AppendJSON(b []byte, r *Record) ([]byte, error) {
	n0 := len(b)
	if out, ok := appendFast(b, r); ok {
		return out, nil
	}
	c := *r // only this copy escapes, not r
	data, err := json.Marshal(&c)
	if err != nil {
		return b[:n0], err
	}
	return append(b[:n0], data...), nil
}

// appendFast appends r as json.Marshal would, or reports false for a
// record it does not handle (a string encoding/json escapes, a Diff, a
// time outside RFC 3339).
func appendFast(b []byte, r *Record) ([]byte, bool) {
	ok := true
	str := func(key, s string, omitEmpty bool) {
		if omitEmpty && s == "" {
			return
		}
		b = append(b, key...)
		b, ok = appendPlain(b, s, ok)
	}
	boolean := func(key string, v bool) {
		b = append(b, key...)
		b = strconv.AppendBool(b, v)
	}
	if len(r.Diff) > 0 {
		return b, false // json.Marshal compacts and validates it
	}
	b = append(b, `{"id":`...)
	b = strconv.AppendInt(b, r.ID, 10)
	b = append(b, `,"time":"`...)
	var err error
	if b, err = r.Time.AppendText(b); err != nil {
		return b, false
	}
	b = append(b, '"')
	str(`,"front":`, r.Front, false)
	str(`,"principal":`, r.Principal, false)
	str(`,"tool":`, r.Tool, false)
	str(`,"qualified":`, r.Qualified, false)
	str(`,"protocol":`, r.Protocol, true)
	str(`,"decision":`, r.Decision, false)
	str(`,"guard":`, r.Guard, true)
	str(`,"reason":`, r.Reason, true)
	if r.Steps == nil {
		b = append(b, `,"steps":null`...)
	} else {
		b = append(b, `,"steps":[`...)
		for i := range r.Steps {
			s := &r.Steps[i]
			if i > 0 {
				b = append(b, ',')
			}
			str(`{"guard":`, s.Guard, false)
			str(`,"decision":`, s.Decision, false)
			str(`,"reason":`, s.Reason, true)
			if s.Review {
				boolean(`,"review":`, true)
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	boolean(`,"dispatched":`, r.Dispatched)
	str(`,"outcome":`, r.Outcome, false)
	b = append(b, `,"duration_ns":`...)
	b = strconv.AppendInt(b, int64(r.Duration), 10)
	str(`,"review_id":`, r.ReviewID, true)
	if r.Stream {
		boolean(`,"stream":`, true)
	}
	str(`,"kind":`, r.Kind, true)
	str(`,"change_id":`, r.Change, true)
	str(`,"toolset":`, r.Toolset, true)
	b = append(b, '}')
	return b, ok
}

// appendPlain appends s in quotes when json.Marshal writes it unchanged
// (jsonx.Unescaped with HTML escaping); it reports false, appending
// nothing, otherwise or when ok is false.
func appendPlain(b []byte, s string, ok bool) ([]byte, bool) {
	if !ok || !jsonx.Unescaped(s, true) {
		return b, false
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"'), true
}
