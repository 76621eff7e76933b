package main

import (
	"bufio"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// The admin server's /metrics speaks Prometheus's text exposition format (version 0.0.4)
// with this small registry instead of the Prometheus client library. That library's data
// model is protocol buffers: linking it brought in the protobuf runtime and its descriptor
// registrations at init, 2 MB of the idle daemon's resident set for a page a scraper reads
// now and then. loopbot needs counters and histograms with labels, gauges read at scrape
// time, and the runtime's and the process's figures (promruntime.go).

// registry holds the metric families and writes them sorted by name, as Prometheus does.
type registry struct {
	mu       sync.Mutex
	families map[string]family
}

// family is one metric name: its HELP and TYPE lines and its samples.
type family interface {
	meta() (name, help, typ string)
	// samples appends the family's lines, without the HELP and TYPE lines.
	samples(b []byte) ([]byte, error)
}

func newRegistry() *registry { return &registry{families: map[string]family{}} }

// register adds families; a name registered twice is a bug, as in Prometheus's
// MustRegister.
func (r *registry) register(fs ...family) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range fs {
		name, _, _ := f.meta()
		if _, ok := r.families[name]; ok {
			panic("metric " + name + " registered twice")
		}
		r.families[name] = f
	}
}

// write renders every family with samples. A family that cannot be read (a store error)
// fails the whole scrape, as Prometheus's handler does, so that no figure is silently
// missing.
func (r *registry) write() ([]byte, error) {
	r.mu.Lock()
	fs := make([]family, 0, len(r.families))
	for _, f := range r.families {
		fs = append(fs, f)
	}
	r.mu.Unlock()
	slices.SortFunc(fs, func(a, b family) int {
		an, _, _ := a.meta()
		bn, _, _ := b.meta()
		return strings.Compare(an, bn)
	})
	var out []byte
	for _, f := range fs {
		lines, err := f.samples(nil)
		if err != nil {
			name, _, _ := f.meta()
			return nil, fmt.Errorf("collect %s: %w", name, err)
		}
		if len(lines) == 0 {
			continue // a vector with no children yet, as Prometheus leaves it out
		}
		name, help, typ := f.meta()
		out = append(out, "# HELP "+name+" "+escapeHelp(help)+"\n# TYPE "+name+" "+typ+"\n"...)
		out = append(out, lines...)
	}
	return out, nil
}

// ServeHTTP serves the text format.
func (r *registry) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	body, err := r.write()
	if err != nil {
		http.Error(w, "An error has occurred while serving metrics:\n\n"+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	bw := bufio.NewWriter(w)
	bw.Write(body)
	bw.Flush()
}

// opts name a family and say what it counts.
type opts struct {
	name, help string
	labels     []string
}

// child is one labelled member of a vector: its label values in the order of opts.labels.
type child[T any] struct {
	values []string
	m      *T
}

// vec is a family of labelled members created on first use.
type vec[T any] struct {
	opts
	mu       sync.Mutex
	children map[string]child[T]
	make     func() *T
}

func (v *vec[T]) with(values []string) *T {
	if len(values) != len(v.labels) {
		panic(fmt.Sprintf("metric %s: %d label values for %d labels", v.name, len(values), len(v.labels)))
	}
	key := strings.Join(values, "\xff")
	v.mu.Lock()
	defer v.mu.Unlock()
	c, ok := v.children[key]
	if !ok {
		c = child[T]{values: slices.Clone(values), m: v.make()}
		v.children[key] = c
	}
	return c.m
}

// sorted returns the members ordered by their label values, as Prometheus orders them.
func (v *vec[T]) sorted() []child[T] {
	v.mu.Lock()
	cs := make([]child[T], 0, len(v.children))
	for _, c := range v.children {
		cs = append(cs, c)
	}
	v.mu.Unlock()
	order := labelOrder(v.labels)
	slices.SortFunc(cs, func(a, b child[T]) int {
		for _, i := range order {
			if c := strings.Compare(a.values[i], b.values[i]); c != 0 {
				return c
			}
		}
		return 0
	})
	return cs
}

// counter is a float that only goes up.
type counter struct{ bits atomic.Uint64 }

func (c *counter) Inc() { c.Add(1) }

func (c *counter) Add(v float64) {
	if v < 0 {
		panic("counter cannot decrease")
	}
	for {
		old := c.bits.Load()
		if c.bits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

func (c *counter) value() float64 { return math.Float64frombits(c.bits.Load()) }

// counterVec counts by label values.
type counterVec struct{ vec[counter] }

func newCounterVec(o opts) *counterVec {
	return &counterVec{vec[counter]{opts: o, children: map[string]child[counter]{}, make: func() *counter { return new(counter) }}}
}

func (v *counterVec) WithLabelValues(values ...string) *counter { return v.with(values) }

func (v *counterVec) meta() (string, string, string) { return v.name, v.help, "counter" }

func (v *counterVec) samples(b []byte) ([]byte, error) {
	for _, c := range v.sorted() {
		b = appendSample(b, v.name, v.labels, c.values, "", "", c.m.value())
	}
	return b, nil
}

// histogram counts observations into cumulative buckets.
type histogram struct {
	mu     sync.Mutex
	upper  []float64
	counts []uint64 // per bucket, not cumulative; the last is +Inf
	sum    float64
	count  uint64
}

func (h *histogram) Observe(v float64) {
	i, _ := slices.BinarySearch(h.upper, v) // the first bucket whose bound is >= v
	h.mu.Lock()
	h.counts[i]++
	h.sum += v
	h.count++
	h.mu.Unlock()
}

// histogramVec is a histogram by label values.
type histogramVec struct {
	vec[histogram]
	buckets []float64
}

func newHistogramVec(o opts, buckets []float64) *histogramVec {
	h := &histogramVec{buckets: buckets}
	h.vec = vec[histogram]{opts: o, children: map[string]child[histogram]{}, make: func() *histogram {
		return &histogram{upper: buckets, counts: make([]uint64, len(buckets)+1)}
	}}
	return h
}

func (v *histogramVec) WithLabelValues(values ...string) *histogram { return v.with(values) }

func (v *histogramVec) meta() (string, string, string) { return v.name, v.help, "histogram" }

func (v *histogramVec) samples(b []byte) ([]byte, error) {
	for _, c := range v.sorted() {
		h := c.m
		h.mu.Lock()
		counts, sum, count := slices.Clone(h.counts), h.sum, h.count
		h.mu.Unlock()
		var cum uint64
		for i, upper := range v.buckets {
			cum += counts[i]
			b = appendSample(b, v.name+"_bucket", v.labels, c.values, "le", formatFloat(upper), float64(cum))
		}
		b = appendSample(b, v.name+"_bucket", v.labels, c.values, "le", "+Inf", float64(count))
		b = appendSample(b, v.name+"_sum", v.labels, c.values, "", "", sum)
		b = appendSample(b, v.name+"_count", v.labels, c.values, "", "", float64(count))
	}
	return b, nil
}

// exponentialBuckets returns n upper bounds, the first start, each factor times the one
// before (Prometheus's ExponentialBuckets).
func exponentialBuckets(start, factor float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = start
		start *= factor
	}
	return out
}

// gaugeSample is one value of a gauge family read at scrape time.
type gaugeSample struct {
	values []string
	value  float64
}

// gaugeFunc is a family read at scrape time: a single value (no labels) or one per label
// values, or an error that fails the scrape.
type gaugeFunc struct {
	opts
	typ     string // "gauge" unless set: "counter" for a total read from elsewhere
	collect func() ([]gaugeSample, error)
}

func (g *gaugeFunc) meta() (string, string, string) {
	if g.typ == "" {
		return g.name, g.help, "gauge"
	}
	return g.name, g.help, g.typ
}

func (g *gaugeFunc) samples(b []byte) ([]byte, error) {
	ss, err := g.collect()
	if err != nil {
		return nil, err
	}
	order := labelOrder(g.labels)
	slices.SortFunc(ss, func(a, b gaugeSample) int {
		for _, i := range order {
			if c := strings.Compare(a.values[i], b.values[i]); c != 0 {
				return c
			}
		}
		return 0
	})
	for _, s := range ss {
		if len(s.values) != len(g.labels) {
			return nil, fmt.Errorf("%d label values for %d labels", len(s.values), len(g.labels))
		}
		b = appendSample(b, g.name, g.labels, s.values, "", "", s.value)
	}
	return b, nil
}

// single is a gaugeFunc's collect for one value without labels.
func single(f func() float64) func() ([]gaugeSample, error) {
	return func() ([]gaugeSample, error) { return []gaugeSample{{value: f()}}, nil }
}

// labelOrder returns the indexes of labels sorted by name: the text format lists labels by
// name.
func labelOrder(labels []string) []int {
	order := make([]int, len(labels))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(labels[a], labels[b]) })
	return order
}

// appendSample appends one line: name{labels sorted by name,extra="extraValue"} value.
func appendSample(b []byte, name string, labels, values []string, extra, extraValue string, v float64) []byte {
	b = append(b, name...)
	if len(labels) > 0 || extra != "" {
		b = append(b, '{')
		for n, i := range labelOrder(labels) {
			if n > 0 {
				b = append(b, ',')
			}
			b = append(b, labels[i]...)
			b = append(b, `="`...)
			b = append(b, escapeLabel(values[i])...)
			b = append(b, '"')
		}
		if extra != "" {
			if len(labels) > 0 {
				b = append(b, ',')
			}
			b = append(b, extra+`="`+extraValue+`"`...)
		}
		b = append(b, '}')
	}
	b = append(b, ' ')
	b = append(b, formatFloat(v)...)
	return append(b, '\n')
}

// formatFloat writes a value as Prometheus's text format does.
func formatFloat(v float64) string {
	switch {
	case v == 1:
		return "1"
	case v == 0:
		return "0"
	case v == -1:
		return "-1"
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, +1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

var (
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
	labelEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)
)

func escapeHelp(s string) string  { return helpEscaper.Replace(s) }
func escapeLabel(s string) string { return labelEscaper.Replace(s) }
