package store

import (
	"bytes"
	"testing"
)

func TestIntakeRecordRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		gen     uint32
		payload string
	}{{1, `{"seq":1}`}, {7, ""}, {^uint32(0), `{"event":{"id":"Ev1"}}`}} {
		rec := appendRecord([]byte("prefix"), tc.gen, []byte(tc.payload))[len("prefix"):]
		gen, payload, size, ok := decodeRecord(append(rec, "next"...))
		if !ok || gen != tc.gen || string(payload) != tc.payload || size != len(rec) {
			t.Errorf("decode(append(%d, %q)) = %d, %q, %d, %v", tc.gen, tc.payload, gen, payload, size, ok)
		}
	}
}

// TestIntakeRecordRefused checks what ends a scan: the file's zeros, a changed byte, a length
// past the end or over maxRecord.
func TestIntakeRecordRefused(t *testing.T) {
	rec := appendRecord(nil, 3, []byte(`{"event":{"id":"Ev1"}}`))
	for i := range rec {
		bad := bytes.Clone(rec)
		bad[i] ^= 0x20
		if _, _, _, ok := decodeRecord(bad); ok {
			t.Errorf("a record with byte %d changed decodes", i)
		}
	}
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"zeros", make([]byte, 64)},
		{"generation 0", appendRecord(nil, 0, []byte("x"))},
		{"over maxRecord", append(appendRecord(nil, 1, make([]byte, maxRecord+1)), 0)},
		{"empty", nil},
		{"short header", rec[:recordHeader-1]},
	} {
		if _, _, _, ok := decodeRecord(tc.b); ok {
			t.Errorf("%s: decodes", tc.name)
		}
	}
}

// FuzzIntakeRecord holds the record decoder to what the journal's scan needs of it on bytes
// a crash left: never a panic, never more than it was given, and a record it accepts is
// one appendRecord writes, byte for byte.
func FuzzIntakeRecord(f *testing.F) {
	f.Add(appendRecord(nil, 1, []byte(`{"seq":1,"event":{"id":"Ev1"}}`)))
	f.Add(appendRecord(appendRecord(nil, 2, []byte("a")), 2, []byte("b")))
	f.Add(make([]byte, 40))
	f.Add([]byte{0, 0, 0, 0, 1, 0, 0, 0, 255, 255, 255, 255})
	f.Fuzz(func(t *testing.T, b []byte) {
		gen, payload, size, ok := decodeRecord(b)
		if !ok {
			return
		}
		if gen == 0 || size > len(b) || size != recordHeader+len(payload) {
			t.Fatalf("decoded gen %d, size %d of %d bytes, payload %d", gen, size, len(b), len(payload))
		}
		if again := appendRecord(nil, gen, payload); !bytes.Equal(again, b[:size]) {
			t.Fatalf("decoded %x, which encodes as %x", b[:size], again)
		}
	})
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }

// FuzzIntakeScan scans a journal whose records are the fuzzer's bytes, from the start and
// from a stored position: it never panics, and what it returns are whole records in order,
// each an entry with an event ID.
func FuzzIntakeScan(f *testing.F) {
	rec := func(gen uint32, id string) []byte {
		return appendRecord(nil, gen, []byte(`{"seq":1,"event":{"id":"`+id+`"}}`))
	}
	f.Add(append(rec(1, "Ev1"), rec(1, "Ev2")...), uint32(0), uint32(0))
	f.Add(append(rec(2, "Ev1"), rec(1, "Ev2")...), uint32(1), uint32(100))
	f.Add(append(rec(3, "Ev1"), rec(3, "Ev2")...), uint32(3), uint32(intakeHeader+40))
	f.Add(rec(1, ""), uint32(0), uint32(0))
	f.Fuzz(func(t *testing.T, b []byte, gen, off uint32) {
		file := make([]byte, intakeSize)
		copy(file[intakeHeader:], b)
		recs, _, err := scanJournal(bytes.NewReader(file), position{gen: gen, off: off})
		if err != nil {
			t.Fatal(err)
		}
		last := position{}
		for _, r := range recs {
			if r.id == "" || !r.end.after(last) || int(r.end.off) > intakeSize {
				t.Fatalf("record %+v after %+v", r, last)
			}
			last = r.end
		}
	})
}
