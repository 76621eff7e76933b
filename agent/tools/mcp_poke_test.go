package tools

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// connectInMemory connects a client session to the test server in memory.
func connectInMemory(t *testing.T) *mcp.ClientSession {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	if _, err := testMCPServer(false).Connect(t.Context(), st, nil); err != nil {
		t.Fatal(err)
	}
	session, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	return session
}

// A call on an earlier session that reports its broken connection late must not end the
// session that replaced it; a report about the current session does.
func TestMCPLateBrokenReportLeavesTheNewSession(t *testing.T) {
	old, current := connectInMemory(t), connectInMemory(t)
	defer old.Close()
	s := &mcpServer{cfg: MCPServerConfig{Name: "x"}, poke: make(chan *mcp.ClientSession, 1), session: current}

	s.poke <- old
	ctx, cancel := context.WithCancel(t.Context())
	ended := make(chan error, 1)
	go func() { ended <- s.wait(ctx) }()
	// The stale report is taken first (it was queued before wait began) and ignored;
	// cancelling is then what ends the wait.
	s.poke <- nil // queued only once the stale one was taken
	cancel()
	if err := <-ended; !errors.Is(err, context.Canceled) {
		t.Errorf("wait = %v; want it ended by its context, not by the late report", err)
	}

	select {
	case <-s.poke: // the nil one, when wait ended before taking it
	default:
	}
	s.session = connectInMemory(t)
	s.poke <- s.session
	if err := s.wait(t.Context()); err == nil || !strings.Contains(err.Error(), "connection broken") {
		t.Errorf("wait = %v; want the report about the current session to end it", err)
	}
}
