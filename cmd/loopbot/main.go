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

// ParseFlags reads the command line: global flags, the command, and its own flags; then the
// config file, the environment, and the flags over both.
func (m *Main) ParseFlags(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("loopbot", flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	fs.StringVar(&m.ConfigPath, "config", m.Getenv("LOOPBOT_CONFIG"), "config file (TOML); env LOOPBOT_CONFIG")
	fs.StringVar(&m.flags.db, "db", "", "database file (overrides [store] path)")
	fs.StringVar(&m.flags.admin, "admin", "", "health and metrics address (overrides [admin] addr)")
	fs.StringVar(&m.flags.web, "web", "", "web console address (overrides [web] addr)")
	fs.StringVar(&m.flags.logLevel, "log-level", "", "debug, info, warn or error (overrides [log] level)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: loopbot [flags] [serve | check [-online] | runs [show ID] | db check | db compact | version]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	rest := fs.Args()
	m.command = "serve"
	if len(rest) > 0 {
		m.command, rest = rest[0], rest[1:]
	}
	switch m.command {
	case "serve", "version":
		if len(rest) > 0 {
			return fmt.Errorf("%s takes no arguments, got %q", m.command, rest)
		}
	case "check":
		cfs := flag.NewFlagSet("check", flag.ContinueOnError)
		cfs.SetOutput(m.Stderr)
		cfs.BoolVar(&m.online, "online", false, "also try each configured credential")
		if err := cfs.Parse(rest); err != nil {
			return err
		}
		if cfs.NArg() > 0 {
			return fmt.Errorf("check takes no arguments, got %q", cfs.Args())
		}
	case "runs":
		if len(rest) != 0 && (len(rest) != 2 || rest[0] != "show") {
			return errors.New("usage: loopbot runs [show ID]")
		}
		m.args = rest
	case "db":
		if len(rest) != 1 || (rest[0] != "check" && rest[0] != "compact") {
			return errors.New("usage: loopbot db check | loopbot db compact")
		}
		m.args = rest
	default:
		return fmt.Errorf("unknown command %q (want serve, check, runs, db or version)", m.command)
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
