package slack

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// fixture reads testdata/name without its header: the leading lines starting with "//",
// which say where the payload was captured.
func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	for bytes.HasPrefix(b, []byte("//")) {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return nil
		}
		b = b[i+1:]
	}
	return b
}
