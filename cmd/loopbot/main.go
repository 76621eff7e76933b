package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	m := NewMain()
	if err := m.ParseFlags(ctx, os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "loopbot:", err)
		os.Exit(2)
	}
	if err := m.Run(ctx); err != nil {
		stop()
		m.Close()
		fmt.Fprintln(os.Stderr, "loopbot:", err)
		os.Exit(1)
	}
	if m.Serving() {
		<-ctx.Done()
		m.Logger.Info("shutting down")
	}
	stop()
	if err := m.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "loopbot:", err)
		os.Exit(1)
	}
}

// Main is the program: ParseFlags reads the command line and the config, Run starts the
// command (serving returns once everything listens), Close stops it. Tests boot the whole
// daemon through it on a temporary directory.
type Main struct {
	Config     Config
	ConfigPath string
	Logger     *slog.Logger
	Stdout     io.Writer
	Stderr     io.Writer
	Getenv     func(string) string

	command string
	args    []string
	online  bool
	flags   flagOverrides

	srv *server
}

// flagOverrides are the flags that override the config file and the environment.
type flagOverrides struct {
	db, admin, web, logLevel string
}

// NewMain returns a Main that talks to the process's standard streams and environment.
func NewMain() *Main {
	return &Main{Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv, Config: DefaultConfig()}
}

// ParseFlags reads the command line (cmdline.go): the command, its arguments and the flags,
// which may stand before or after the command; then the config file, the environment, and the
// flags over both.
func (m *Main) ParseFlags(ctx context.Context, args []string) error {
	if err := m.parseCommandLine(args); err != nil {
		return err
	}
	if m.command == "version" {
		return nil
	}

	cfg, err := LoadConfig(m.ConfigPath, m.Getenv)
	if err != nil {
		return err
	}
	if m.flags.db != "" {
		cfg.Store.Path = m.flags.db
	}
	if m.flags.admin != "" {
		cfg.Admin.Addr = m.flags.admin
	}
	if m.flags.web != "" {
		cfg.Web.Addr = m.flags.web
	}
	if m.flags.logLevel != "" {
		cfg.Log.Level = m.flags.logLevel
	}
	if err := cfg.Check(); err != nil {
		return err
	}
	m.Config = cfg
	m.Logger = newLogger(m.Stderr, cfg.Log)
	return nil
}

// Serving reports whether Run started the daemon, which runs until Close.
func (m *Main) Serving() bool { return m.srv != nil }

// Run executes the command. For serve it returns once the daemon is up.
func (m *Main) Run(ctx context.Context) error {
	switch m.command {
	case "version":
		_, err := fmt.Fprintln(m.Stdout, "loopbot", version())
		return err
	case "check":
		return m.check(ctx)
	case "runs":
		return m.runs(ctx)
	case "db":
		return m.db(ctx)
	}
	srv, err := startServer(ctx, m.Config, m.Logger)
	if err != nil {
		return err
	}
	m.srv = srv
	return nil
}

// Close stops the daemon: it stops taking events, checkpoints running runs and closes the
// database. It is bounded so a stuck platform cannot hold the process.
func (m *Main) Close() error {
	if m.srv == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := m.srv.close(ctx)
	m.srv = nil
	return err
}

func newLogger(w io.Writer, c LogConfig) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.Level))
	opts := &slog.HandlerOptions{Level: level}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// version is the module version and VCS revision the binary was built from.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			v += " " + s.Value[:12]
		}
	}
	return v
}
