package web

import (
	"fmt"
	"strings"
)

// indexPage is the console's page, static/index.html, whose only dynamic parts are
// optional banners: {{if .Field}}before{{.Field}}after{{end}}, shown when the field is set,
// with the field's text escaped as html/template escapes text in HTML.
//
// It is rendered here rather than with html/template because text/template calls methods
// by name through reflection, and a binary that may do that keeps every exported method of
// every type it links: html/template made the binary 6 MB larger, of which the idle daemon
// mapped 2.2 MB. TestIndexPageMatchesHTMLTemplate holds the two to the same output.
type indexPage struct {
	parts []indexPart
}

// indexPart is fixed text, or a banner shown when field is set.
type indexPart struct {
	text                 string
	field, before, after string
}

// parseIndexPage splits the page at its banners and refuses any other template action, so
// that a page edited beyond what this renders fails at start (and in every test). It cuts
// strings rather than matching a regular expression: New runs at every start, and a
// backtracking match of the page took 37 KB.
func parseIndexPage(page string) (*indexPage, error) {
	var p indexPage
	rest := page
	for {
		text, action, found := strings.Cut(rest, "{{if .")
		if !found {
			break
		}
		field, body, ok := strings.Cut(action, "}}")
		before, after, ok2 := strings.Cut(body, "{{."+field+"}}")
		after, rest2, ok3 := strings.Cut(after, "{{end}}")
		if !ok || !ok2 || !ok3 || field == "" || strings.ContainsAny(field, " {}.") {
			return nil, fmt.Errorf("index page: a banner is not {{if .Field}}...{{.Field}}...{{end}}")
		}
		p.parts = append(p.parts, indexPart{text: text}, indexPart{field: field, before: before, after: after})
		rest = rest2
	}
	p.parts = append(p.parts, indexPart{text: rest})
	for _, part := range p.parts {
		if strings.Contains(part.text+part.before+part.after, "{{") {
			return nil, fmt.Errorf("index page: a template action other than {{if .Field}}...{{.Field}}...{{end}}")
		}
	}
	return &p, nil
}

// render writes the page with the banners whose fields are set.
func (p *indexPage) render(fields map[string]string) string {
	var b strings.Builder
	for _, part := range p.parts {
		if part.field == "" {
			b.WriteString(part.text)
			continue
		}
		if v := fields[part.field]; v != "" {
			b.WriteString(part.before)
			b.WriteString(htmlTextEscaper.Replace(v))
			b.WriteString(part.after)
		}
	}
	return b.String()
}

// htmlTextEscaper escapes text in HTML as html/template does (its htmlEscaper).
var htmlTextEscaper = strings.NewReplacer("\x00", "\uFFFD", `"`, "&#34;", "&", "&amp;", "'", "&#39;", "+", "&#43;", "<", "&lt;", ">", "&gt;")
