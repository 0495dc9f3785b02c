package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// chromium returns the Debian chromium-headless-shell (or chromium)
// binary. Under make or CI (CLOUDGATE_CACHE_DIR or CI set) a missing one
// fails the test; .ci/setup.sh installs it.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CLOUDGATE_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium-headless-shell", "chromium"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CLOUDGATE_CACHE_DIR") != "" || os.Getenv("CI") != "" {
		t.Fatal("chromium-headless-shell is not installed: run bash .ci/setup.sh (make setup)")
	}
	t.Skip("chromium-headless-shell is not installed (bash .ci/setup.sh installs it; under make or CI this fails)")
	return ""
}

// openInBrowser opens the file htmlPath in a headless Chromium (bin) of
// 1200x900 px and waits for the element of id readyID; problems returns what the page has
// reported so far: console errors and warnings, exceptions, error log
// entries. The browser closes when the test ends.
func openInBrowser(t *testing.T, bin, htmlPath string, readyID string) (bctx context.Context, problems func() []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin),
		chromedp.Flag("no-sandbox", true), chromedp.WindowSize(1200, 900))
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(acancel)
	bctx, bcancel := chromedp.NewContext(actx)
	t.Cleanup(bcancel)

	var mu sync.Mutex
	var seen []string
	if err := chromedp.Listen(bctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeWarning {
				var args []string
				for _, a := range e.Args {
					args = append(args, string(a.Value))
				}
				seen = append(seen, fmt.Sprintf("console.%s: %s", e.Type, strings.Join(args, " ")))
			}
		case *runtime.EventExceptionThrown:
			seen = append(seen, "exception: "+e.ExceptionDetails.Text)
		case *log.EventEntryAdded:
			if e.Entry.Level == log.EntryLevelError {
				seen = append(seen, "log: "+e.Entry.Text)
			}
		}
	}); err != nil {
		t.Fatalf("chromium %s: %v", bin, err)
	}
	if err := chromedp.Do(bctx, chromedp.Navigate("file://"+htmlPath), chromedp.WaitReady(chromedp.ID(readyID))); err != nil {
		t.Fatalf("chromium %s: %v", bin, err)
	}
	return bctx, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}

// pageFacts is what the browser reads from the report.
type pageFacts struct {
	Figures []struct {
		Title  string  `json:"title"`
		Width  float64 `json:"width"`
		Height float64 `json:"height"`
		Lines  int     `json:"lines"`
		Bars   int     `json:"bars"`
		Legend int     `json:"legend"`
	} `json:"figures"`
	Cells []struct {
		Scenario, Column, Key, Value string
	} `json:"cells"`
	Summary string `json:"summary"`
}

// readPage measures, in the page, each figure's drawn series (polylines
// of three points or more, and filled bars other than the background),
// the headline table's cells and the summary.
const readPage = `(() => {
  const figures = [...document.querySelectorAll('figure')].map(f => {
    const svg = f.querySelector('svg');
    const r = svg.getBoundingClientRect();
    let lines = 0, bars = 0;
    for (const p of svg.querySelectorAll('path')) {
      const d = p.getAttribute('d') || '';
      const b = p.getBBox();
      if (b.width <= 0 && b.height <= 0) continue;
      if (d.startsWith('M0,0L')) continue; // the plot's background
      if (d.endsWith('Z')) { if (b.width > 0 && b.height > 0) bars++; continue; }
      if ((d.match(/L/g) || []).length >= 3) lines++;
    }
    const texts = [...svg.querySelectorAll('text')].map(t => t.textContent);
    return {title: f.querySelector('figcaption').textContent, width: r.width, height: r.height,
      lines, bars, legend: texts.length};
  });
  const cells = [...document.querySelectorAll('table.headline td')].map(td => ({
    Scenario: td.closest('table').dataset.scenario, Column: td.dataset.column, Key: td.dataset.key, Value: td.textContent}));
  return {figures, cells, summary: document.getElementById('summary').textContent};
})()`

// TestReportInBrowser generates the HTML report of a small run, opens it
// in a real headless Chromium and checks what a reader sees: no console
// error or exception, every plot drawn with its series, the summary and
// every headline number equal to the JSON report's. With
// CLOUDGATE_REPORT_PNG set it also writes a PNG of the headline plot
// there (make report-png: docs/img/report-headline.png).
func TestReportInBrowser(t *testing.T) {
	bin := chromium(t)
	o := DefaultOptions()
	o.Scenarios = []string{ScenarioSteady, ScenarioScaleup}
	o.Columns = []string{ColBare, ColBareClient, ColCache, ColList}
	o.Nodes, o.Services, o.SteadyWindow = 100, 2, 10*time.Minute
	o.ScaleupNodes = 50
	if raceEnabled {
		o.Services = 0 // the upstream service controller's own data race (race_test.go)
	}
	rep := runVirtual(t, o)

	dir := t.TempDir()
	htmlPath, jsonPath := filepath.Join(dir, "report.html"), filepath.Join(dir, "report.json")
	if err := rep.WriteHTML(htmlPath); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteJSON(jsonPath); err != nil {
		t.Fatal(err)
	}

	bctx, problems := openInBrowser(t, bin, htmlPath, "summary")
	facts, err := chromedp.Run(bctx, chromedp.Evaluate[pageFacts](readPage))
	if err != nil {
		t.Fatalf("reading the page: %v", err)
	}
	for _, p := range problems() {
		t.Errorf("page: %s", p)
	}

	// Every plot draws its series.
	if len(facts.Figures) == 0 {
		t.Fatal("no plot in the page")
	}
	for _, f := range facts.Figures {
		if f.Width < 100 || f.Height < 100 {
			t.Errorf("plot %q is %.0fx%.0f px", f.Title, f.Width, f.Height)
		}
		if f.Lines+f.Bars == 0 {
			t.Errorf("plot %q draws no series with data", f.Title)
		}
		if strings.HasPrefix(f.Title, "upstream reads per second") && f.Lines < len(o.Columns) {
			t.Errorf("plot %q draws %d lines, want one per column (%d)", f.Title, f.Lines, len(o.Columns))
		}
	}

	// The summary and the headline numbers equal the JSON report's.
	raw, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var fromJSON Report
	if err := json.Unmarshal(raw, &fromJSON); err != nil {
		t.Fatal(err)
	}
	var sum strings.Builder
	fromJSON.WriteSummary(&sum, "")
	if got, want := strings.TrimSpace(facts.Summary), strings.TrimSpace(sum.String()); got != want {
		t.Errorf("page summary:\n%s\nwant (from the JSON report):\n%s", got, want)
	}
	var doc struct {
		Scenarios []struct {
			Scenario string                    `json:"scenario"`
			Columns  map[string]map[string]any `json:"columns"`
		} `json:"scenarios"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{} // scenario/column/key -> value
	for _, s := range doc.Scenarios {
		for col, side := range s.Columns {
			for _, k := range headlineKeys {
				v, ok := side[k]
				if k == "steady_reads_per_hour" {
					if st, _ := side["steady"].(map[string]any); st != nil {
						v, ok = st["reads_per_hour"], true
					}
				}
				f, isNum := v.(float64)
				switch {
				case ok && isNum:
					want[s.Scenario+"/"+col+"/"+k] = strconv.FormatFloat(f, 'f', -1, 64)
				default:
					want[s.Scenario+"/"+col+"/"+k] = "—"
				}
			}
		}
	}
	if len(facts.Cells) != len(want) {
		t.Errorf("%d headline cells in the page, want %d", len(facts.Cells), len(want))
	}
	for _, c := range facts.Cells {
		key := c.Scenario + "/" + c.Column + "/" + c.Key
		if w, ok := want[key]; !ok || c.Value != w {
			t.Errorf("headline %s = %q in the page, %q in the JSON", key, c.Value, w)
		}
	}

	if out := os.Getenv("CLOUDGATE_REPORT_PNG"); out != "" {
		png, err := chromedp.Run(bctx, chromedp.Screenshot(chromedp.CSS("figure svg"), chromedp.NodeVisible))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(out, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (%d bytes)", out, len(png))
	}
}
