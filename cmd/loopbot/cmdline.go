package main

import (
	"errors"
	"flag"
	"fmt"
	"strings"
)

// subcommand is one command of loopbot: how it is written, what it does, the flags of its
// own, and a check of its positional arguments.
type subcommand struct {
	name, args, summary string
	flags               func(m *Main, fs *flag.FlagSet)
	check               func(args []string) error
}

// subcommands are loopbot's subcommands in the order the usage lists them. serve is the default.
var subcommands = []subcommand{
	{name: "serve", summary: "run the bot: the chat platforms, the web console and the admin server (the default)", check: noArgs("serve")},
	{name: "check", args: "[-online]", summary: "validate the config, list the tools the model will see; -online also tries each credential",
		flags: func(m *Main, fs *flag.FlagSet) {
			fs.BoolVar(&m.online, "online", false, "also try each configured credential (model endpoint, Slack, Discord)")
		}, check: noArgs("check")},
	{name: "runs", args: "[show ID]", summary: "list the runs of the database, or show one run's transcript", check: func(args []string) error {
		if len(args) != 0 && (len(args) != 2 || args[0] != "show") {
			return errors.New("usage: loopbot runs [show ID]")
		}
		return nil
	}},
	{name: "db", args: "check | compact", summary: "check the database's consistency, or compact it (with the daemon stopped)", check: func(args []string) error {
		if len(args) != 1 || (args[0] != "check" && args[0] != "compact") {
			return errors.New("usage: loopbot db check | loopbot db compact")
		}
		return nil
	}},
	{name: "version", summary: "print the version the binary was built from", check: noArgs("version")},
}

func noArgs(name string) func([]string) error {
	return func(args []string) error {
		if len(args) > 0 {
			return fmt.Errorf("%s takes no arguments, got %q", name, args)
		}
		return nil
	}
}

func findCommand(name string) (subcommand, bool) {
	for _, c := range subcommands {
		if c.name == name {
			return c, true
		}
	}
	return subcommand{}, false
}

// globalFlags are the flags every command takes, before or after its name.
func (m *Main) globalFlags(fs *flag.FlagSet) {
	fs.StringVar(&m.ConfigPath, "config", m.Getenv("LOOPBOT_CONFIG"), "config file (TOML); env LOOPBOT_CONFIG")
	fs.StringVar(&m.flags.db, "db", "", "database file (overrides [store] path)")
	fs.StringVar(&m.flags.admin, "admin", "", "health and metrics address (overrides [admin] addr)")
	fs.StringVar(&m.flags.web, "web", "", "web console address (overrides [web] addr)")
	fs.StringVar(&m.flags.logLevel, "log-level", "", "debug, info, warn or error (overrides [log] level)")
}

// parseCommandLine sets the command, its arguments and the flags. The global flags may come
// before the command, after it, or both (loopbot check -config x.toml is loopbot -config
// x.toml check); -h anywhere prints the usage of what it follows and returns flag.ErrHelp.
func (m *Main) parseCommandLine(args []string) error {
	top := flag.NewFlagSet("loopbot", flag.ContinueOnError)
	top.SetOutput(m.Stderr)
	m.globalFlags(top)
	top.Usage = func() { m.usage(top) }
	if err := top.Parse(args); err != nil {
		return err
	}
	rest := top.Args()
	m.command = "serve"
	if len(rest) > 0 {
		m.command, rest = rest[0], rest[1:]
	}
	if m.command == "help" {
		m.usage(top)
		return flag.ErrHelp
	}
	cmd, ok := findCommand(m.command)
	if !ok {
		return fmt.Errorf("unknown command %q (want serve, check, runs, db or version; loopbot -h lists them)", m.command)
	}

	// The command's flag set holds the global flags too, so they may follow the command. The
	// values given before the command are set on it again, since defining a flag resets the
	// variable it shares with the first set.
	given := map[string]string{}
	top.Visit(func(f *flag.Flag) { given[f.Name] = f.Value.String() })
	fs := flag.NewFlagSet("loopbot "+cmd.name, flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	m.globalFlags(fs)
	for name, v := range given {
		if err := fs.Set(name, v); err != nil {
			return err
		}
	}
	if cmd.flags != nil {
		cmd.flags(m, fs)
	}
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "usage: loopbot %s [flags]", cmd.name)
		if cmd.args != "" {
			fmt.Fprintf(w, " %s", cmd.args)
		}
		fmt.Fprintf(w, "\n\n%s.\n\nflags (before or after %q):\n", cmd.summary, cmd.name)
		fs.PrintDefaults()
	}
	pos, err := parseInterspersed(fs, rest)
	if err != nil {
		return err
	}
	if err := cmd.check(pos); err != nil {
		return err
	}
	m.args = pos
	return nil
}

// usage prints the program's usage: the commands, then the global flags.
func (m *Main) usage(fs *flag.FlagSet) {
	w := fs.Output()
	fmt.Fprintln(w, "usage: loopbot [flags] [command] [command flags]")
	fmt.Fprintln(w, "\ncommands:")
	for _, c := range subcommands {
		fmt.Fprintf(w, "  %-24s %s\n", strings.TrimSpace(c.name+" "+c.args), c.summary)
	}
	fmt.Fprintln(w, "\nflags (before or after the command; loopbot COMMAND -h shows a command's own):")
	fs.PrintDefaults()
}

// parseInterspersed parses flags that may stand between positional arguments, as in
// "runs show ID -db x.db", and returns the positional ones in order. Everything after "--" is
// positional.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}
