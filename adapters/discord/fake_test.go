package discord

import (
	"context"
	"testing"

	"github.com/loopbot/loopbot/adapters/discord/discordfake"
)

// FakeDiscord is a discordfake.Server for one test: it stops when the test ends and fails
// the test with whatever the fake found wrong in what it was sent, and its waits fail the
// test after waitLimit.
type FakeDiscord struct {
	*discordfake.Server
}

// NewFakeDiscord starts a fake Discord for the test.
func NewFakeDiscord(t testing.TB) *FakeDiscord {
	t.Helper()
	s, err := discordfake.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Close()
		if err := s.Err(); err != nil {
			t.Errorf("fake discord: %v", err)
		}
	})
	return &FakeDiscord{s}
}

// WaitFor waits until pred holds for the requests received so far and returns them.
func (f *FakeDiscord) WaitFor(t testing.TB, what string, pred func([]discordfake.Request) bool) []discordfake.Request {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	reqs, err := f.Server.WaitFor(ctx, pred)
	if err != nil {
		t.Fatalf("fake discord: no %s: %v", what, err)
	}
	return reqs
}

// WaitHandshake waits for the next gateway connection's Identify or Resume and returns which.
func (f *FakeDiscord) WaitHandshake(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	kind, err := f.Server.WaitHandshake(ctx)
	if err != nil {
		t.Fatalf("fake discord: %v", err)
	}
	return kind
}

// WaitHeartbeat waits until the latest gateway connection is fully up.
func (f *FakeDiscord) WaitHeartbeat(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := f.Server.WaitHeartbeat(ctx); err != nil {
		t.Fatalf("fake discord: %v", err)
	}
}

// Dispatch sends a gateway event.
func (f *FakeDiscord) Dispatch(t testing.TB, typ string, d any) {
	t.Helper()
	if err := f.Server.Dispatch(typ, d); err != nil {
		t.Fatalf("fake discord: %v", err)
	}
}
