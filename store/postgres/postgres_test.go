package postgres_test

import (
	"context"
	"testing"

	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/store/postgres"
	"github.com/loopbot/loopbot/store/postgres/pgtest"
	"github.com/loopbot/loopbot/store/storetest"
)

// closed are the stores a test closed itself, which its cleanup leaves alone. Tests that
// reopen do not run in parallel.
var closed = map[*postgres.DB]bool{}

// openURL opens the store at url and closes it, after checking it, when the test ends.
func openURL(t testing.TB, url string, opts ...postgres.Option) *postgres.DB {
	t.Helper()
	db, err := postgres.Open(t.Context(), url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if closed[db] {
			return
		}
		if err := db.Check(context.Background()); err != nil {
			t.Error(err)
		}
		if err := db.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return db
}

func TestConformance(t *testing.T) {
	urls := map[bot.Store]string{}
	open := func(t *testing.T) bot.Store {
		url := pgtest.URL(t)
		db := openURL(t, url)
		urls[db] = url
		return db
	}
	reopen := func(t *testing.T, s bot.Store) bot.Store {
		if err := s.(*postgres.DB).Check(t.Context()); err != nil {
			t.Error(err)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("close before reopen: %v", err)
		}
		closed[s.(*postgres.DB)] = true
		return openURL(t, urls[s])
	}
	second := func(t *testing.T, s bot.Store) bot.Store { return openURL(t, urls[s]) }
	storetest.Run(t, open, storetest.WithReopen(reopen), storetest.WithSecondHandle(second))
}

// BenchmarkCheckpoint is storetest.BenchCheckpoint on a database of the test cluster.
func BenchmarkCheckpoint(b *testing.B) {
	storetest.BenchCheckpoint(b, openURL(b, pgtest.URL(b)))
}
