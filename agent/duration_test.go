package agent_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
)

func TestDurationUnmarshalText(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Duration
		wantErr string
	}{
		{"30s", 30 * time.Second, ""},
		{"2m", 2 * time.Minute, ""},
		{"1h30m", 90 * time.Minute, ""},
		{"250ms", 250 * time.Millisecond, ""},
		{"0", 0, ""},
		{"30", 0, "needs a unit"},
		{"1.5", 0, "needs a unit"},
		{"-5", 0, "needs a unit"},
		{"forever", 0, `not "forever"`},
		{"", 0, `not ""`},
		{" 30s", 0, "want a duration"},
		{"-1s", 0, "negative"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			d := agent.Duration(7)
			err := d.UnmarshalText([]byte(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("UnmarshalText(%q) = %v, want an error containing %q", tt.in, err, tt.wantErr)
				}
				if d != 7 {
					t.Errorf("a failed UnmarshalText changed the value to %v", d)
				}
				return
			}
			if err != nil {
				t.Fatalf("UnmarshalText(%q): %v", tt.in, err)
			}
			if time.Duration(d) != tt.want {
				t.Errorf("UnmarshalText(%q) = %v, want %v", tt.in, time.Duration(d), tt.want)
			}
		})
	}
	var d agent.Duration
	if err := d.UnmarshalText([]byte("30")); !errors.Is(err, agent.ErrDurationUnit) {
		t.Errorf("a bare number: %v, want ErrDurationUnit", err)
	}
}

func TestDurationRoundTrip(t *testing.T) {
	for _, v := range []time.Duration{0, time.Millisecond, 90 * time.Second, 30 * time.Minute, 49 * time.Hour} {
		b, err := agent.Duration(v).MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back agent.Duration
		if err := back.UnmarshalText(b); err != nil {
			t.Fatalf("%v marshals to %q, which does not read back: %v", v, b, err)
		}
		if time.Duration(back) != v {
			t.Errorf("%v -> %q -> %v", v, b, time.Duration(back))
		}
	}
}

func FuzzDurationUnmarshalText(f *testing.F) {
	for _, s := range []string{"30s", "30", "1h2m3s", "-1s", "forever", "1e3", ".5h"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var d agent.Duration
		if err := d.UnmarshalText([]byte(s)); err != nil {
			return
		}
		if d < 0 {
			t.Fatalf("%q read as the negative %v", s, time.Duration(d))
		}
		b, _ := d.MarshalText()
		var back agent.Duration
		if err := back.UnmarshalText(b); err != nil || back != d {
			t.Fatalf("%q -> %v -> %q -> %v, %v", s, time.Duration(d), b, time.Duration(back), err)
		}
	})
}
