package mcpclient

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// scriptEnv makes the test binary a scripted stdio server (scriptedServer) instead of
// running the tests.
const scriptEnv = "MCPCLIENT_TEST_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(scriptEnv) == "1" {
		scriptedServer()
		return
	}
	os.Exit(m.Run())
}

// scriptedServer answers the handshake and tools/list, writing around its answers what
// servers write: a log line that is not JSON, a notification, and a ping of its own. It
// exits when asked to call "exit".
func scriptedServer() {
	in := bufio.NewScanner(os.Stdin)
	out := bufio.NewWriter(os.Stdout)
	write := func(s string) { fmt.Fprintln(out, s); out.Flush() }
	for in.Scan() {
		var m message
		if json.Unmarshal(in.Bytes(), &m) != nil || len(m.ID) == 0 || m.Method == "" {
			continue
		}
		id := string(m.ID)
		switch m.Method {
		case "initialize":
			write("server starting (a log line on stdout)")
			write(`{"jsonrpc":"2.0","id":` + id + `,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"s","version":"1"}}}`)
		case "tools/list":
			write(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"listing"}}`)
			write(`{"jsonrpc":"2.0","id":"srv-1","method":"ping"}`)
			write(`{"jsonrpc":"2.0","id":` + id + `,"result":{"tools":[{"name":"t","inputSchema":{"type":"object"}}]}}`)
		case "tools/call":
			os.Exit(3)
		}
	}
}

func TestStdio(t *testing.T) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), scriptEnv+"=1")
	s, err := ConnectCommand(t.Context(), cmd, time.Second, Options{Name: "t", Version: "1"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tools, err := s.ListTools(t.Context())
	if err != nil || len(tools) != 1 || tools[0].Name != "t" {
		t.Fatalf("tools %+v, %v", tools, err)
	}
	// The server dies in the middle of the call: the call and the session end.
	if _, err := s.CallTool(t.Context(), "exit", nil, nil); !errors.Is(err, ErrConnectionClosed) {
		t.Errorf("call on a dying server = %v, want ErrConnectionClosed", err)
	}
	if err := waitEnd(t, s); !errors.Is(err, ErrConnectionClosed) {
		t.Errorf("wait = %v", err)
	}
}

func TestStdioServerThatDoesNotStart(t *testing.T) {
	_, err := ConnectCommand(t.Context(), exec.Command("/nonexistent/mcp-server"), time.Second, Options{})
	if err == nil || !strings.Contains(err.Error(), "nonexistent") {
		t.Errorf("connect = %v", err)
	}
}
