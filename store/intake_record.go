package store

import (
	"encoding/binary"
	"hash/crc32"
)

// The intake journal's records (intake.go).
//
// A record is a header of three little-endian uint32s, the CRC-32C (Castagnoli) of
// everything after it, the generation and the payload's length, followed by the payload:
// an inbox entry as appendInboxEntry writes it, the bytes the inbox bucket keeps. A
// generation is never 0, so the zeros the file is made of end a scan, as does a record of
// another generation (one left from before the file was last started over) or a record a
// crash tore (its CRC does not match).

const (
	recordHeader = 12
	// maxRecord bounds a record's payload, so that a damaged length is refused before it is
	// read: Slack's longest message is 40,000 characters, which JSON escapes to at most
	// six bytes each.
	maxRecord = 1 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// beginRecord appends room for a record's header to b, and returns where the record starts:
// its payload is appended after it, and endRecord fills the header in.
func beginRecord(b []byte) ([]byte, int) {
	return append(b, make([]byte, recordHeader)...), len(b)
}

// endRecord fills in the header of the record that starts at start and ends at the end of b.
func endRecord(b []byte, start int, gen uint32) {
	rec := b[start:]
	binary.LittleEndian.PutUint32(rec[4:], gen)
	binary.LittleEndian.PutUint32(rec[8:], uint32(len(rec)-recordHeader))
	binary.LittleEndian.PutUint32(rec[0:], crc32.Checksum(rec[4:], castagnoli))
}

// appendRecord appends a record of generation gen holding payload to b.
func appendRecord(b []byte, gen uint32, payload []byte) []byte {
	b, start := beginRecord(b)
	b = append(b, payload...)
	endRecord(b, start, gen)
	return b
}

// recordLength returns the length of the payload of the record whose header starts b, or
// false when the header cannot start a record: a generation of 0 (the file's zeros) or a
// length over maxRecord.
func recordLength(b []byte) (gen uint32, n int, ok bool) {
	if len(b) < recordHeader {
		return 0, 0, false
	}
	gen = binary.LittleEndian.Uint32(b[4:])
	length := binary.LittleEndian.Uint32(b[8:])
	if gen == 0 || length > maxRecord {
		return 0, 0, false
	}
	return gen, int(length), true
}

// decodeRecord reads the record at the start of b and returns its generation, its payload
// (a slice of b) and its size with the header; ok is false when b does not start with a
// whole record whose CRC matches.
func decodeRecord(b []byte) (gen uint32, payload []byte, size int, ok bool) {
	gen, n, ok := recordLength(b)
	if !ok || len(b)-recordHeader < n {
		return 0, nil, 0, false
	}
	rec := b[:recordHeader+n]
	if binary.LittleEndian.Uint32(rec) != crc32.Checksum(rec[4:], castagnoli) {
		return 0, nil, 0, false
	}
	return gen, rec[recordHeader:], len(rec), true
}
