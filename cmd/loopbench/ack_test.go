package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestAckFakes runs the ack scenario with the fake Slack in a child process and in this
// one: both start, connect the adapter, and read every envelope's ack; another place is
// refused.
func TestAckFakes(t *testing.T) {
	for _, where := range []string{ackFakeProcess, ackFakeInline} {
		t.Run(where, func(t *testing.T) {
			got := figuresOf(t, "-scenarios=ack", "-ack-events=30", "-ack-fake="+where)
			if p50, p99 := got["ack_p50_ms"], got["ack_p99_ms"]; p50 <= 0 || p99 < p50 {
				t.Errorf("ack_p50_ms = %v, ack_p99_ms = %v; want 0 < p50 <= p99", p50, p99)
			}
			if c := got["ack_accept_commits"]; c < 1 {
				t.Errorf("ack_accept_commits = %v, want at least one", c)
			}
		})
	}
	var out bytes.Buffer
	if err := run(t.Context(), []string{"-scenarios=ack", "-ack-fake=remote"}, &out); err == nil || !strings.Contains(err.Error(), "-ack-fake") {
		t.Errorf("run with -ack-fake=remote: %v, want the flag refused", err)
	}
}

// TestAckRedeliveryFails drops the Socket Mode connection at an envelope's ack, in each
// place the fake runs: Slack delivers the envelope again (and the others not acknowledged
// yet), and the scenario must fail rather than report a redelivery's latency as the
// envelope's.
func TestAckRedeliveryFails(t *testing.T) {
	for _, where := range []string{ackFakeProcess, ackFakeInline} {
		t.Run(where, func(t *testing.T) {
			o := options{ackEvents: 10, ackFake: where, ackDrop: "env-3"}
			figs, err := ackLatency(t.Context(), o)
			if err == nil || !strings.Contains(err.Error(), " was delivered 2 times: the socket dropped") {
				t.Errorf("ackLatency with the connection dropped at env-3's ack = %v, %v; want a redelivery refused", figs, err)
			}
		})
	}
}

func TestAckLatencies(t *testing.T) {
	ack := func(id string, deliveries int, ms int) ackRecord {
		return ackRecord{EnvelopeID: id, Deliveries: deliveries, Latency: time.Duration(ms) * time.Millisecond}
	}
	tests := []struct {
		name    string
		n       int
		acks    []ackRecord
		want    []time.Duration
		wantErr string
	}{
		{name: "all once", n: 3, acks: []ackRecord{ack("env-2", 1, 5), ack("env-0", 1, 1), ack("env-1", 1, 3)},
			want: []time.Duration{time.Millisecond, 3 * time.Millisecond, 5 * time.Millisecond}},
		{name: "missing", n: 3, acks: []ackRecord{ack("env-0", 1, 1), ack("env-2", 1, 2)}, wantErr: "2 of 3 envelopes acknowledged"},
		{name: "redelivered", n: 2, acks: []ackRecord{ack("env-0", 1, 1), ack("env-1", 2, 2)}, wantErr: "env-1 was delivered 2 times"},
		{name: "acknowledged twice", n: 2, acks: []ackRecord{ack("env-0", 1, 1), ack("env-0", 1, 2), ack("env-1", 1, 1)}, wantErr: "env-0 was acknowledged twice"},
		{name: "not sent", n: 2, acks: []ackRecord{ack("env-0", 1, 1), ack("env-2", 1, 1)}, wantErr: `"env-2", which the burst did not send`},
		{name: "not a burst ID", n: 2, acks: []ackRecord{ack("env-01", 1, 1), ack("env-1", 1, 1)}, wantErr: `"env-01", which the burst did not send`},
		{name: "other", n: 1, acks: []ackRecord{ack("x", 1, 1)}, wantErr: `"x", which the burst did not send`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ackLatencies(tt.n, tt.acks)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("ackLatencies = %v, %v; want an error with %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(got, tt.want) {
				t.Errorf("ackLatencies = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}
