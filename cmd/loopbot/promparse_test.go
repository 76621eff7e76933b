package main

import (
	"bytes"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// TestExpositionParsesWithPrometheus reads loopbot's whole /metrics page with Prometheus's
// own text parser (a test-only dependency; the binary writes the format itself), so a
// difference from the format a scraper accepts fails here rather than in someone's
// monitoring.
func TestExpositionParsesWithPrometheus(t *testing.T) {
	m := newMetrics()
	m.toolCalls.WithLabelValues(`say "hi"\n`, "ok").Add(2)
	m.toolSeconds.WithLabelValues("shell").Observe(0.3)
	m.toolSeconds.WithLabelValues("shell").Observe(1e9)
	m.chatCalls.WithLabelValues("slack", "chat.update", "error").Inc()
	m.approvals.WithLabelValues("approved").Observe(12)
	page, err := m.reg.write()
	if err != nil {
		t.Fatal(err)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	families, err := p.TextToMetricFamilies(bytes.NewReader(page))
	if err != nil {
		t.Fatalf("Prometheus's parser refuses the page: %v\n%s", err, page)
	}
	want := map[string]dto.MetricType{
		"loopbot_tool_calls_total":      dto.MetricType_COUNTER,
		"loopbot_tool_call_seconds":     dto.MetricType_HISTOGRAM,
		"loopbot_chat_api_calls_total":  dto.MetricType_COUNTER,
		"loopbot_approval_wait_seconds": dto.MetricType_HISTOGRAM,
		"go_goroutines":                 dto.MetricType_GAUGE,
		"go_gc_duration_seconds":        dto.MetricType_SUMMARY,
		"process_resident_memory_bytes": dto.MetricType_GAUGE,
	}
	for name, typ := range want {
		f, ok := families[name]
		if !ok {
			t.Errorf("no family %s", name)
			continue
		}
		if f.GetType() != typ {
			t.Errorf("%s is a %v, want a %v", name, f.GetType(), typ)
		}
	}
	if f := families["loopbot_tool_calls_total"]; f != nil {
		got := f.GetMetric()[0]
		var tool string
		for _, l := range got.GetLabel() {
			if l.GetName() == "tool" {
				tool = l.GetValue()
			}
		}
		if tool != `say "hi"\n` || got.GetCounter().GetValue() != 2 {
			t.Errorf("tool call read back as tool %q value %v, want %q and 2", tool, got.GetCounter().GetValue(), `say "hi"\n`)
		}
	}
	if f := families["loopbot_tool_call_seconds"]; f != nil {
		h := f.GetMetric()[0].GetHistogram()
		if h.GetSampleCount() != 2 || h.GetSampleSum() != 0.3+1e9 {
			t.Errorf("histogram read back as count %d sum %v, want 2 and %v", h.GetSampleCount(), h.GetSampleSum(), 0.3+1e9)
		}
	}
}
