// Command loopbot is the chat-platform agent bot: it serves Slack, Discord and a local web
// console from one agent loop, and offers commands to check the configuration, to read the
// runs in its database and to check and compact the database.
//
//	loopbot [flags]                 serve (the default command)
//	loopbot check [-online]         validate the config; list the tools; try the credentials
//	loopbot runs                    list the runs in the database
//	loopbot runs show ID            the transcript of one run
//	loopbot db check                check the database file and list its quarantine
//	loopbot db compact              pack the database file, keeping the original as FILE.bak
//	loopbot version                 print the version
//
// Flags go before or after the command, and -h after any command prints its usage
// (cmdline.go). check warns when the shell tool is on but bubblewrap or prlimit is missing
// (checkshell.go), since the tool then refuses every command.
//
// It is wiring only: it reads flags, the config file and the environment, builds the store,
// the model clients, the tools, the agent, the bot and the platform adapters, serves /healthz
// and /metrics (and, for `loopbot runs` in another process, the runs, with a token it writes
// next to the database: runsremote.go), and turns SIGINT and SIGTERM into an orderly stop. The
// config file's sections are the packages' own Config types, embedded as they are
// (config.go); configfile.go decodes the file strictly, naming the key, the line and the type
// wanted in every error. The chat adapters check their own credentials for check -online.
// The model clients' errors carry the endpoint's host for the log (models.go, endpointModel);
// the thread shows only their safe summary. Main (ParseFlags, Run, Close) lets a test boot the whole daemon on a temporary directory.
package main
