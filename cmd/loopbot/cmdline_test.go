package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestParseCommandLine: the global flags may stand before the command, after it, or between
// its arguments, and mean the same wherever they are.
func TestParseCommandLine(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		command string
		pos     []string
		config  string
		db      string
		online  bool
	}{
		{"no command is serve", nil, "serve", nil, "", "", false},
		{"flag before serve", []string{"-config", "x.toml"}, "serve", nil, "x.toml", "", false},
		{"flag after serve", []string{"serve", "-config", "x.toml"}, "serve", nil, "x.toml", "", false},
		{"flag before check", []string{"-config", "x.toml", "check"}, "check", nil, "x.toml", "", false},
		{"flag after check", []string{"check", "-config", "x.toml"}, "check", nil, "x.toml", "", false},
		{"= form after check", []string{"check", "-config=x.toml", "-online"}, "check", nil, "x.toml", "", true},
		{"before and after", []string{"-db", "a.db", "check", "-online", "-config", "x.toml"}, "check", nil, "x.toml", "a.db", true},
		{"after wins over before", []string{"-db", "a.db", "runs", "-db", "b.db"}, "runs", nil, "", "b.db", false},
		{"between arguments", []string{"runs", "show", "-db", "a.db", "r1"}, "runs", []string{"show", "r1"}, "", "a.db", false},
		{"after arguments", []string{"runs", "show", "r1", "-config", "x.toml"}, "runs", []string{"show", "r1"}, "x.toml", "", false},
		{"db check with a flag after", []string{"db", "check", "-db", "a.db"}, "db", []string{"check"}, "", "a.db", false},
		{"after --, all positional", []string{"runs", "show", "--", "-r1"}, "runs", []string{"show", "-r1"}, "", "", false},
		{"version", []string{"version"}, "version", nil, "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMain()
			m.Stderr = io.Discard
			m.Getenv = noEnv
			if err := m.parseCommandLine(tt.args); err != nil {
				t.Fatalf("parse %q: %v", tt.args, err)
			}
			if m.command != tt.command || !reflect.DeepEqual(m.args, tt.pos) || m.ConfigPath != tt.config || m.flags.db != tt.db || m.online != tt.online {
				t.Errorf("parse %q = command %q args %q config %q db %q online %v; want %q %q %q %q %v", tt.args,
					m.command, m.args, m.ConfigPath, m.flags.db, m.online, tt.command, tt.pos, tt.config, tt.db, tt.online)
			}
		})
	}
}

// TestParseCommandLineHelp: -h after every command, and before any, prints that command's
// usage and returns flag.ErrHelp, on which main exits 0.
func TestParseCommandLineHelp(t *testing.T) {
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"-h"}, []string{"usage: loopbot [flags] [command]", "serve", "check [-online]", "runs [show ID]", "db check | compact", "version", "-config"}},
		{[]string{"help"}, []string{"usage: loopbot [flags] [command]"}},
		{[]string{"-config", "x.toml", "-h", "check"}, []string{"usage: loopbot [flags] [command]"}},
		{[]string{"serve", "-h"}, []string{"usage: loopbot serve [flags]", "-config", "-web"}},
		{[]string{"check", "-h"}, []string{"usage: loopbot check [flags]", "-online", "-config"}},
		{[]string{"check", "-online", "--help"}, []string{"usage: loopbot check [flags]"}},
		{[]string{"runs", "-h"}, []string{"usage: loopbot runs [flags] [show ID]", "-db"}},
		{[]string{"runs", "show", "r1", "-h"}, []string{"usage: loopbot runs [flags] [show ID]"}},
		{[]string{"db", "-h"}, []string{"usage: loopbot db [flags] check | compact"}},
		{[]string{"db", "check", "-h"}, []string{"usage: loopbot db [flags] check | compact"}},
		{[]string{"version", "-h"}, []string{"usage: loopbot version [flags]"}},
	}
	for _, tt := range tests {
		var out bytes.Buffer
		m := NewMain()
		m.Stdout, m.Stderr = io.Discard, &out
		m.Getenv = noEnv
		err := m.ParseFlags(context.Background(), tt.args)
		if !errors.Is(err, flag.ErrHelp) {
			t.Errorf("ParseFlags(%q) = %v, want flag.ErrHelp", tt.args, err)
		}
		for _, w := range tt.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("ParseFlags(%q) printed no %q:\n%s", tt.args, w, out.String())
			}
		}
	}
}

// TestParseFlagsConfigAfterCommand loads the config file named after the command.
func TestParseFlagsConfigAfterCommand(t *testing.T) {
	db := filepath.Join(t.TempDir(), "from-file.db")
	cfg := writeConfig(t, "[store]\npath = \""+db+"\"\n")
	m := NewMain()
	m.Stderr = io.Discard
	m.Getenv = noEnv
	if err := m.ParseFlags(context.Background(), []string{"check", "-config", cfg}); err != nil {
		t.Fatal(err)
	}
	if m.Config.Store.Path != db {
		t.Errorf("store path = %q, want %q from the file named after the command", m.Config.Store.Path, db)
	}
}

// checkOutput runs loopbot check with args in this process and returns what it printed.
func checkOutput(t *testing.T, env map[string]string, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	m := NewMain()
	m.Stdout, m.Stderr = &out, io.Discard
	m.Getenv = func(k string) string { return env[k] }
	args = append([]string{"check", "-db", filepath.Join(t.TempDir(), "loopbot.db")}, args...)
	if err := m.ParseFlags(context.Background(), args); err != nil {
		t.Fatal(err)
	}
	err := m.Run(context.Background())
	return out.String(), err
}

// TestCheckOnlineNothingConfigured: check -online with no credential says there is nothing
// to check and fails, rather than printing an empty heading and succeeding.
func TestCheckOnlineNothingConfigured(t *testing.T) {
	out, err := checkOutput(t, nil, "-online")
	if err == nil {
		t.Errorf("check -online with nothing configured succeeded:\n%s", out)
	}
	if !strings.Contains(out, "online checks:\n  nothing to check: no model endpoint") {
		t.Errorf("output does not say there is nothing to check:\n%s", out)
	}
	// Without -online the same config checks fine.
	if out, err := checkOutput(t, nil); err != nil {
		t.Errorf("check: %v\n%s", err, out)
	}
}

// pathWith makes a directory holding links to the named programs of this machine only, to
// stand as a PATH that lacks the others. It skips when a program to link is itself missing.
func pathWith(t *testing.T, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, n := range names {
		p := lookOrSkip(t, n)
		if err := os.Symlink(p, filepath.Join(dir, n)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestCheckWarnsShellDependencies: with the shell tool on, check warns when bubblewrap or
// prlimit is missing, saying the tool will refuse and how to install what is missing; with
// both present, or the tool off, it warns of nothing.
func TestCheckWarnsShellDependencies(t *testing.T) {
	tests := []struct {
		name   string
		path   []string
		config string
		want   []string
		not    []string
	}{
		{"both present", []string{"bwrap", "prlimit"}, "", nil, []string{"WARNING"}},
		{"no bwrap", []string{"prlimit"}, "", []string{"WARNING: shell: bubblewrap (bwrap) is not found: the shell tool will refuse to run every command; install it: apt-get install bubblewrap"}, []string{"prlimit is not found"}},
		{"no prlimit", []string{"bwrap"}, "", []string{"WARNING: shell: prlimit is not found: the shell tool will refuse", "apt-get install util-linux"}, []string{"bubblewrap (bwrap) is not found"}},
		{"neither", nil, "", []string{"bubblewrap (bwrap) is not found", "prlimit is not found"}, nil},
		{"no bwrap, unsandboxed allowed", []string{"prlimit"}, "[tools.shell]\nallow_unsandboxed = true\n", []string{"runs commands WITHOUT a sandbox"}, []string{"refuse"}},
		{"shell off", nil, "[tools.shell]\nenabled = false\n", nil, []string{"WARNING"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := pathWith(t, tt.path...)
			t.Setenv("PATH", path)
			out, err := checkOutput(t, nil, "-config", writeConfig(t, tt.config))
			if err != nil {
				t.Fatalf("check: %v\n%s", err, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			for _, n := range tt.not {
				if strings.Contains(out, n) {
					t.Errorf("output has %q:\n%s", n, out)
				}
			}
		})
	}
}

// TestBinaryExitCodes runs the binary: -h after each command exits 0 with the command's
// usage; check -online with nothing to check exits non-zero saying so; a flag after the
// command is honoured.
func TestBinaryExitCodes(t *testing.T) {
	bin := loopbotBinary(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "loopbot.db")
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-h"}, 0, "usage: loopbot [flags] [command]"},
		{[]string{"serve", "-h"}, 0, "usage: loopbot serve [flags]"},
		{[]string{"check", "-h"}, 0, "usage: loopbot check [flags]"},
		{[]string{"runs", "-h"}, 0, "usage: loopbot runs [flags]"},
		{[]string{"db", "-h"}, 0, "usage: loopbot db [flags]"},
		{[]string{"version", "-h"}, 0, "usage: loopbot version [flags]"},
		{[]string{"check", "-db", db, "-online"}, 1, "nothing to check"},
		{[]string{"check", "-db", db}, 0, "database: " + db},
		{[]string{"dance"}, 2, `unknown command "dance"`},
	}
	for _, tt := range tests {
		cmd := exec.Command(bin, tt.args...)
		cmd.Env = []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH")}
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		code := 0
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			code = exit.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != tt.code || !strings.Contains(string(out), tt.want) {
			t.Errorf("loopbot %q exited %d, want %d with %q:\n%s", tt.args, code, tt.code, tt.want, out)
		}
	}
}
