package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/loopbot/loopbot/bot"
)

// Leader elections (bot.Elector), on the suite's injected clock.

func elector(t *testing.T, s bot.Store) bot.Elector {
	t.Helper()
	e, ok := s.(bot.Elector)
	if !ok {
		t.Fatalf("%T does not implement bot.Elector", s)
	}
	return e
}

func lead(t *testing.T, e bot.Elector, owner string, now time.Duration) bot.Leadership {
	t.Helper()
	got, err := e.Lead(t.Context(), "outbox", owner, at(now), 30*time.Second)
	if err != nil {
		t.Fatalf("%s leads at t0+%s: %v", owner, now, err)
	}
	return got
}

// testElection walks a role through its terms: the first to ask leads; another does not
// while the leadership is live, however often it asks; the leader renews within its term;
// the role goes to another once it expired, and at once once its leader resigned.
func testElection(t *testing.T, su *suite) {
	s := su.open(t)
	e := elector(t, s)
	l := func(owner string, term int64, expires time.Duration) bot.Leadership {
		return bot.Leadership{Role: "outbox", Owner: owner, Term: term, Expires: at(expires)}
	}
	equal(t, "first election", lead(t, e, "a", 0), l("a", 1, 30*time.Second))
	equal(t, "b while a leads", lead(t, e, "b", 10*time.Second), l("a", 1, 30*time.Second))
	equal(t, "a renews", lead(t, e, "a", 20*time.Second), l("a", 1, 50*time.Second))
	equal(t, "b after a's first expiry, before its renewed one", lead(t, e, "b", 49*time.Second), l("a", 1, 50*time.Second))
	equal(t, "b at a's expiry", lead(t, e, "b", 50*time.Second), l("b", 2, 80*time.Second))
	equal(t, "a after b took over", lead(t, e, "a", 51*time.Second), l("b", 2, 80*time.Second))
	if err := e.Resign(t.Context(), "outbox", "a"); err != nil {
		t.Fatalf("a resigns what it does not hold: %v", err)
	}
	equal(t, "b after a resigned in vain", lead(t, e, "b", 52*time.Second), l("b", 2, 82*time.Second))
	if err := e.Resign(t.Context(), "outbox", "b"); err != nil {
		t.Fatalf("b resigns: %v", err)
	}
	equal(t, "a after b resigned", lead(t, e, "a", 53*time.Second), l("a", 3, 83*time.Second))
	other, err := e.Lead(t.Context(), "other", "b", at(53*time.Second), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "another role", other, bot.Leadership{Role: "other", Owner: "b", Term: 1, Expires: at(113 * time.Second)})
}

// testElectionExclusive has eight replicas, on every handle the backend offers, ask for a
// role none holds at the same instant: exactly one leads, and all agree which.
func testElectionExclusive(t *testing.T, su *suite) {
	s := su.open(t)
	handles := []bot.Store{s}
	if su.second != nil {
		handles = append(handles, su.second(t, s))
	}
	got := make([]bot.Leadership, 8)
	errs := race(8, func(i int) error {
		var err error
		got[i], err = elector(t, handles[i%len(handles)]).Lead(t.Context(), "outbox", fmt.Sprintf("replica-%d", i), t0, time.Minute)
		return err
	})
	leaders := map[string]bool{}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("replica %d: %v", i, err)
		}
		leaders[got[i].Owner] = true
		if got[i].Term != 1 {
			t.Errorf("replica %d saw term %d, want 1", i, got[i].Term)
		}
	}
	if len(leaders) != 1 {
		t.Errorf("replicas saw leaders %v, want one", leaders)
	}
}
