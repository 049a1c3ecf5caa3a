package main

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// family is an exported metric family: its type (counter, gauge,
// histogram) and the label names its series carry.
type family struct {
	typ    string
	labels map[string]bool
}

// targetLabels are added by Prometheus to every scraped series, whatever
// the metric.
var targetLabels = map[string]bool{"job": true, "instance": true}

// promqlParser parses with Prometheus' default options.
var promqlParser = parser.NewParser(parser.Options{})

// builtinVariables are Grafana's own; every other $name in a query must
// be one of the dashboard's variables.
var builtinVariables = map[string]bool{"__rate_interval": true, "__interval": true, "__range": true}

var (
	rangeVariable  = regexp.MustCompile(`\[\$\{?(\w+)\}?\]`)
	offsetVariable = regexp.MustCompile(`offset \$\{?(\w+)\}?`)
	anyVariable    = regexp.MustCompile(`\$\{?(\w+)`)
	legendLabel    = regexp.MustCompile(`\{\{\s*(\w+)\s*\}\}`)
)

// checker checks PromQL expressions against the exported families.
type checker struct {
	families  map[string]family
	variables map[string]bool
}

// selected is a vector selector resolved to its family.
type selected struct {
	name   string // as written, e.g. x_bucket
	family family
	suffix string // _bucket, _count or _sum of a histogram; "" for the family itself
}

func (s selected) labels() map[string]bool {
	out := map[string]bool{}
	for l := range s.family.labels {
		out[l] = true
	}
	for l := range targetLabels {
		out[l] = true
	}
	if s.suffix == "_bucket" {
		out["le"] = true
	}
	return out
}

// resolve finds the family a metric name belongs to.
func (c *checker) resolve(name string) (selected, error) {
	if f, ok := c.families[name]; ok {
		return selected{name: name, family: f}, nil
	}
	for _, suffix := range []string{"_bucket", "_count", "_sum"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			if f, ok := c.families[base]; ok && f.typ == "histogram" {
				return selected{name: name, family: f, suffix: suffix}, nil
			}
		}
	}
	return selected{}, fmt.Errorf("%s is not an exported metric", name)
}

// parse replaces Grafana's variables by values PromQL accepts (a range
// for [$x], the text itself inside label values, where the variables
// stand) and parses the result.
func (c *checker) parse(expr string) (parser.Expr, []error) {
	var errs []error
	for _, m := range anyVariable.FindAllStringSubmatch(expr, -1) {
		if !builtinVariables[m[1]] && !c.variables[m[1]] {
			errs = append(errs, fmt.Errorf("uses $%s, which is not a variable of the dashboard", m[1]))
		}
	}
	e, err := promqlParser.ParseExpr(offsetVariable.ReplaceAllString(rangeVariable.ReplaceAllString(expr, "[5m]"), "offset 5m"))
	if err != nil {
		return nil, append(errs, err)
	}
	return e, errs
}

// counterFunctions take a range of a counter; gaugeFunctions one of a
// gauge.
var (
	counterFunctions = map[string]bool{"rate": true, "irate": true, "increase": true, "resets": true}
	gaugeFunctions   = map[string]bool{"delta": true, "idelta": true, "deriv": true, "predict_linear": true, "changes": true,
		"avg_over_time": true, "min_over_time": true, "max_over_time": true, "sum_over_time": true, "count_over_time": true,
		"last_over_time": true, "quantile_over_time": true, "stddev_over_time": true, "stdvar_over_time": true}
)

// check returns what is wrong with a panel query: a syntax error, a
// metric that is not exported, a label it does not have, a function that
// does not fit the metric's type, a histogram_quantile that loses le, and
// a legend naming a label the result does not carry.
func (c *checker) check(expr, legend string) []error {
	e, errs := c.parse(expr)
	if e == nil {
		return errs
	}
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	parser.Inspect(e, func(node parser.Node, path []parser.Node) error {
		switch n := node.(type) {
		case *parser.VectorSelector:
			if n.Name == "" {
				fail("selector %s has no metric name", n)
				return nil
			}
			s, err := c.resolve(n.Name)
			if err != nil {
				errs = append(errs, err)
				return nil
			}
			have := s.labels()
			leFixed := false
			for _, m := range n.LabelMatchers {
				if m.Name == labels.MetricName {
					continue
				}
				if !have[m.Name] {
					fail("%s has no label %q (it has %v)", n.Name, m.Name, sorted(have))
				}
				if m.Name == "le" && (m.Type == labels.MatchEqual || m.Type == labels.MatchRegexp) {
					leFixed = true
				}
			}
			c.checkUse(s, path, leFixed, fail)
		case *parser.AggregateExpr:
			if len(n.Grouping) == 0 {
				return nil
			}
			avail := map[string]bool{}
			for _, s := range c.selectors(n.Expr) {
				for l := range s.labels() {
					avail[l] = true
				}
			}
			for _, g := range n.Grouping {
				if !avail[g] {
					fail("%s groups by %q, which none of its series has", n.Op, g)
				}
			}
		case *parser.Call:
			if n.Func.Name == "histogram_quantile" {
				phi, ok := n.Args[0].(*parser.NumberLiteral)
				if !ok || phi.Val < 0 || phi.Val > 1 {
					fail("histogram_quantile's quantile %s is not a number in [0, 1]", n.Args[0])
				}
				for _, s := range c.selectors(n.Args[1]) {
					if s.suffix != "_bucket" {
						fail("histogram_quantile over %s, not over a histogram's _bucket series", s.name)
					}
				}
			}
		}
		return nil
	})

	if legend != "" {
		out := c.outputLabels(e)
		for _, m := range legendLabel.FindAllStringSubmatch(legend, -1) {
			if !out[m[1]] {
				fail("legend %q names {{%s}}, which the result does not carry (it has %v)", legend, m[1], sorted(out))
			}
		}
	}
	return errs
}

// checkUse checks that a series is used as its type requires: a counter
// (or a histogram's _count, _sum, _bucket) only through rate, irate or
// increase (a counter also as a side of unless, which selects series by
// presence: "x unless x offset w" are the series new in the window); a
// gauge never through rate, irate or increase; a histogram's _bucket only in
// histogram_quantile, with le kept by every aggregation in between (or
// with le fixed by a matcher, to count below a bound).
func (c *checker) checkUse(s selected, path []parser.Node, leFixed bool, fail func(string, ...any)) {
	counterLike := s.family.typ == "counter" || s.suffix != ""
	if s.family.typ == "counter" && operandOfUnless(path) {
		// "x unless x offset w" selects series by their presence (the
		// ones new in the window), not by rate.
		return
	}
	var fn *parser.Call
	if len(path) >= 2 {
		if _, ok := path[len(path)-1].(*parser.MatrixSelector); ok {
			fn, _ = path[len(path)-2].(*parser.Call)
		}
	}
	switch {
	case counterLike && (fn == nil || !counterFunctions[fn.Func.Name]):
		fail("%s is a counter: use it through rate(), irate() or increase()", s.name)
	case !counterLike && fn != nil && counterFunctions[fn.Func.Name]:
		fail("%s is a %s: %s() is for counters", s.name, s.family.typ, fn.Func.Name)
	case !counterLike && s.family.typ != "gauge" && fn != nil && gaugeFunctions[fn.Func.Name]:
		fail("%s is a %s: %s() is for gauges", s.name, s.family.typ, fn.Func.Name)
	}
	if s.suffix != "_bucket" || leFixed {
		return
	}
	// Walk up from the selector to histogram_quantile; every aggregation
	// on the way must keep le.
	for i := len(path) - 1; i >= 0; i-- {
		switch n := path[i].(type) {
		case *parser.AggregateExpr:
			if n.Without == slices.Contains(n.Grouping, "le") {
				fail("%s: %s drops le before histogram_quantile", s.name, n.Op)
			}
		case *parser.Call:
			if n.Func.Name == "histogram_quantile" {
				return
			}
		}
	}
	fail("%s is a histogram's buckets: use it in histogram_quantile() or with an le matcher", s.name)
}

// operandOfUnless reports whether the node the path leads to is a side of
// an unless operation (parentheses aside).
func operandOfUnless(path []parser.Node) bool {
	for i := len(path) - 1; i >= 0; i-- {
		switch n := path[i].(type) {
		case *parser.ParenExpr:
			continue
		case *parser.BinaryExpr:
			return n.Op == parser.LUNLESS
		}
		return false
	}
	return false
}

// selectors returns the resolved vector selectors under a node.
func (c *checker) selectors(node parser.Node) []selected {
	var out []selected
	parser.Inspect(node, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			if s, err := c.resolve(vs.Name); err == nil {
				out = append(out, s)
			}
		}
		return nil
	})
	return out
}

// outputLabels approximates the label names of an expression's result:
// enough to check a legend.
func (c *checker) outputLabels(e parser.Expr) map[string]bool {
	switch n := e.(type) {
	case *parser.VectorSelector:
		if s, err := c.resolve(n.Name); err == nil {
			return s.labels()
		}
		return map[string]bool{}
	case *parser.MatrixSelector:
		return c.outputLabels(n.VectorSelector)
	case *parser.ParenExpr:
		return c.outputLabels(n.Expr)
	case *parser.UnaryExpr:
		return c.outputLabels(n.Expr)
	case *parser.SubqueryExpr:
		return c.outputLabels(n.Expr)
	case *parser.StepInvariantExpr:
		return c.outputLabels(n.Expr)
	case *parser.AggregateExpr:
		out := map[string]bool{}
		if n.Without {
			for l := range c.outputLabels(n.Expr) {
				if !slices.Contains(n.Grouping, l) {
					out[l] = true
				}
			}
			return out
		}
		if n.Op == parser.TOPK || n.Op == parser.BOTTOMK {
			return c.outputLabels(n.Expr)
		}
		for _, g := range n.Grouping {
			out[g] = true
		}
		return out
	case *parser.Call:
		for _, a := range n.Args {
			if a.Type() == parser.ValueTypeVector || a.Type() == parser.ValueTypeMatrix {
				out := c.outputLabels(a)
				if n.Func.Name == "histogram_quantile" {
					delete(out, "le")
				}
				return out
			}
		}
		return map[string]bool{}
	case *parser.BinaryExpr:
		lhs, rhs := c.outputLabels(n.LHS), c.outputLabels(n.RHS)
		switch {
		case n.Op == parser.LOR:
			for l := range rhs {
				lhs[l] = true
			}
			return lhs
		case n.LHS.Type() != parser.ValueTypeVector:
			return rhs
		}
		return lhs
	}
	return map[string]bool{}
}

func sorted(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// labelValuesQuery is a Grafana label_values(selector, label) variable
// query.
var labelValuesQuery = regexp.MustCompile(`^label_values\((.+),\s*(\w+)\)$`)

// checkVariableQuery checks a label_values query: the selector's metric
// is exported and has the matchers' labels and the label asked for.
func (c *checker) checkVariableQuery(query string) []error {
	m := labelValuesQuery.FindStringSubmatch(query)
	if m == nil {
		return []error{fmt.Errorf("%q is not label_values(selector, label)", query)}
	}
	matchers, err := promqlParser.ParseMetricSelector(m[1])
	if err != nil {
		return []error{fmt.Errorf("%q: %v", query, err)}
	}
	var name string
	for _, mt := range matchers {
		if mt.Name == labels.MetricName && mt.Type == labels.MatchEqual {
			name = mt.Value
		}
	}
	s, err := c.resolve(name)
	if err != nil {
		return []error{fmt.Errorf("%q: %v", query, err)}
	}
	var errs []error
	have := s.labels()
	for _, mt := range matchers {
		if mt.Name != labels.MetricName && !have[mt.Name] {
			errs = append(errs, fmt.Errorf("%q: %s has no label %q", query, name, mt.Name))
		}
	}
	if !have[m[2]] {
		errs = append(errs, fmt.Errorf("%q: %s has no label %q", query, name, m[2]))
	}
	return errs
}
