package web

import (
	"strings"
	"testing"
)

func TestConfigCheck(t *testing.T) {
	token := "0123456789abcdef"
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{"defaults", Config{}, ""},
		{"localhost", Config{Addr: "localhost:9000"}, ""},
		{"ipv6 loopback", Config{Addr: "[::1]:9000"}, ""},
		{"all interfaces without token", Config{Addr: ":8080"}, "needs web users, trusted_proxies or token"},
		{"any address without token", Config{Addr: "0.0.0.0:8080"}, "needs web users, trusted_proxies or token"},
		{"lan address without token", Config{Addr: "192.168.1.5:8080"}, "needs web users, trusted_proxies or token"},
		{"all interfaces with token", Config{Addr: ":8080", Token: token}, ""},
		{"short token", Config{Addr: ":8080", Token: "short"}, "web token: want at least 16"},
		{"token with space", Config{Token: token + " x"}, "web token: must not contain spaces"},
		{"no port", Config{Addr: "localhost"}, "web addr"},
		{"negative bounds", Config{MaxThreads: -1, MaxMessages: -2}, "web max_threads"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.cfg.check()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if got.Addr == "" || got.MaxThreads <= 0 || got.MaxMessages <= 0 {
					t.Errorf("defaults not filled: %+v", got)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
	if _, err := New(Config{Addr: ":8080"}); err == nil || !strings.Contains(err.Error(), "refusing to serve it unprotected") {
		t.Errorf("New on all interfaces without a token: err = %v", err)
	}
}
