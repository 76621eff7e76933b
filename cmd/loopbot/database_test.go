package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/loopbot/loopbot/store/postgres"
	"github.com/loopbot/loopbot/store/postgres/pgtest"
)

// TestStoreConfig checks [store]'s backend choice, the URL from the environment over the
// file, and that a postgres backend without a URL is refused.
func TestStoreConfig(t *testing.T) {
	const fileURL = "postgres://loopbot:file-pw-0123456789@db.file/loopbot"
	const envURL = "postgres://loopbot:env-pw-0123456789@db.env/loopbot"
	tests := []struct {
		name    string
		body    string
		env     string
		wantURL string
		wantErr string
	}{
		{"default is bbolt", "", "", "", ""},
		{"postgres from the file", "[store]\nbackend = \"postgres\"\nurl = \"" + fileURL + "\"\n", "", fileURL, ""},
		{"environment over file", "[store]\nbackend = \"postgres\"\nurl = \"" + fileURL + "\"\n", envURL, envURL, ""},
		{"postgres from the environment alone", "[store]\nbackend = \"postgres\"\n", envURL, envURL, ""},
		{"postgres without a URL", "[store]\nbackend = \"postgres\"\n", "", "", "no URL is set"},
		{"unknown backend", "[store]\nbackend = \"etcd\"\n", "", "", `store.backend "etcd": want bbolt or postgres`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := writeConfig(t, tt.body)
			cfg, err := LoadConfig(p, func(k string) string {
				if k == "LOOPBOT_DATABASE_URL" {
					return tt.env
				}
				return ""
			})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, want an error saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Store.URL != tt.wantURL {
				t.Errorf("url %q, want %q", cfg.Store.URL, tt.wantURL)
			}
		})
	}
}

// TestDatabasePasswordStaysSecret checks every place the configured database is named: the
// description in messages and `loopbot check`'s output never carry the password, and the
// bot redacts it from what it posts.
func TestDatabasePasswordStaysSecret(t *testing.T) {
	const pw = "db-canary-0123456789"
	cfg := DefaultConfig()
	cfg.Store.Backend, cfg.Store.URL = backendPostgres, "postgres://loopbot:"+pw+"@db.internal:5432/loopbot?sslmode=require"
	if d := cfg.Store.describe(); strings.Contains(d, pw) || !strings.Contains(d, "db.internal") {
		t.Errorf("describe() = %q, want the URL without its password", d)
	}
	if !slices.Contains(secretValues(cfg), pw) {
		t.Errorf("secretValues lacks the database password")
	}
	var out bytes.Buffer
	m := &Main{Config: cfg, Stdout: &out, Stderr: &out, Logger: slog.New(slog.DiscardHandler)}
	_ = m.check(context.Background())
	if strings.Contains(out.String(), pw) {
		t.Errorf("loopbot check prints the password:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "database: postgres postgres://loopbot:xxxxx@db.internal:5432/loopbot?sslmode=require (postgres)") {
		t.Errorf("loopbot check does not name the backend and the redacted URL:\n%s", out.String())
	}
}

// TestCheckOnlinePostgres runs `loopbot check -online` and `loopbot db check` against a
// real database: before the first start it is reachable with no schema; after a daemon
// opened it, at the current version.
func TestCheckOnlinePostgres(t *testing.T) {
	url := pgtest.URL(t)
	cfg := DefaultConfig()
	cfg.Store.Backend, cfg.Store.URL = backendPostgres, url
	got, err := probeDatabase(t.Context(), cfg.Store)
	if err != nil || !strings.Contains(got, "no loopbot schema yet") {
		t.Errorf("probe of a new database = %q, %v; want it reachable without a schema", got, err)
	}
	db, err := openDatabase(t.Context(), cfg.Store, slog.New(slog.DiscardHandler), newMetrics())
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	got, err = probeDatabase(t.Context(), cfg.Store)
	if want := fmt.Sprintf("connected; schema version %d", postgres.SchemaVersion()); err != nil || got != want {
		t.Errorf("probe after the first start = %q, %v; want %q", got, err, want)
	}
	var out bytes.Buffer
	m := &Main{Config: cfg, Stdout: &out, Stderr: &out, Logger: slog.New(slog.DiscardHandler), args: []string{"check"}}
	if err := m.db(t.Context()); err != nil || !strings.Contains(out.String(), "every record decodes, 0 quarantined") {
		t.Errorf("db check = %v:\n%s", err, out.String())
	}
	m.args = []string{"compact"}
	if err := m.db(t.Context()); err == nil || !strings.Contains(err.Error(), "autovacuum") {
		t.Errorf("db compact on postgres = %v, want a refusal naming autovacuum", err)
	}
}
