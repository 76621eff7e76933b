package store

import (
	"context"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// TestConsoleRowDamaged: a row of the console's view that does not decode is skipped, and
// the rows after it are read.
func TestConsoleRowDamaged(t *testing.T) {
	ctx := context.Background()
	db, err := Open(filepath.Join(t.TempDir(), "bot.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	first, err := db.PutConsoleRow(ctx, "t1", "m1", []byte("one"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.PutConsoleRow(ctx, "t1", "m2", []byte("two")); err != nil {
		t.Fatal(err)
	}
	if err := db.bolt.Update(func(btx *bolt.Tx) error {
		return btx.Bucket(bucketConsoleRows).Put(seqKey(first), []byte{1, 2})
	}); err != nil {
		t.Fatal(err)
	}
	var got []string
	if err := db.ConsoleRows(ctx, 0, func(seq, pos uint64, thread, key string, data []byte) error {
		got = append(got, key+"="+string(data))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != "m2=two" {
		t.Errorf("rows after a damaged one: %q, want m2=two", got)
	}
}
