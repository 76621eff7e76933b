package postgres

import (
	"testing"

	"github.com/loopbot/loopbot/store/postgres/pgtest"
)

// TestMain starts the one PostgreSQL cluster the package's tests share (pgtest).
func TestMain(m *testing.M) { pgtest.Main(m) }
