package dispatch_test

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"

	"github.com/gorgonia-ooc/outofcore/vm"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/dispatch"
)

// tableIntro is the line of doc.go after which the generated op table
// stands (as a block of tab-indented comment lines).
const tableIntro = "// The gorgonia ops, as planned for TestCoverage's graphs (generated: OOC_UPDATE_DOC=1 go test -run TestCoverage"

// workOf is, per op type of m's program, the kernels and cuBLAS calls its
// functions launched (without the dtype suffix).
func workOf(m *vm.Machine) map[string]map[string]bool {
	ls, ok := dispatch.LaunchesOf(m)
	if !ok {
		return nil
	}
	p := m.Program()
	w := map[string]map[string]bool{}
	for _, l := range ls {
		op := strings.TrimPrefix(fmt.Sprintf("%T", p.Funcs[l.Func].Op), "*")
		if w[op] == nil {
			w[op] = map[string]bool{}
		}
		k := l.Kernel
		switch {
		case strings.HasPrefix(k, "cublas"): // cublasSgemv_v2 -> cuBLAS gemv
			k = "cuBLAS " + strings.TrimSuffix(k[len("cublasS"):], "_v2")
		case strings.HasPrefix(k, "convert_"):
			k = "convert"
		case strings.HasSuffix(k, "_f32"), strings.HasSuffix(k, "_f64"):
			k = k[:len(k)-4]
		}
		w[op][k] = true
	}
	return w
}

// opTable renders the generated table: per gorgonia op type the kernels its
// plans launched in the coverage graphs, then the op types refused, then
// those no program brings to the dispatch (unplanned).
func opTable(table map[string]map[string]bool, unsupported map[string]string) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "op\tdevice work")
	ops := make([]string, 0, len(table))
	for op := range table {
		ops = append(ops, op)
	}
	slices.Sort(ops)
	for _, op := range ops {
		ks := make([]string, 0, len(table[op]))
		for k := range table[op] {
			ks = append(ks, k)
		}
		slices.Sort(ks)
		fmt.Fprintf(tw, "%s\t%s\n", op, strings.Join(ks, ", "))
	}
	refused := make([]string, 0, len(unsupported))
	for op := range unsupported {
		refused = append(refused, op)
	}
	slices.Sort(refused)
	for _, op := range refused {
		fmt.Fprintf(tw, "%s\trefused: %s\n", strings.TrimPrefix(op, "*"), unsupported[op])
	}
	none := make([]string, 0, len(unplanned))
	for op := range unplanned {
		none = append(none, op)
	}
	slices.Sort(none)
	for _, op := range none {
		fmt.Fprintf(tw, "%s\t%s\n", op, unplanned[op])
	}
	_ = tw.Flush()
	lines := strings.SplitAfter(b.String(), "\n")
	var out strings.Builder
	for _, l := range lines {
		if l != "" {
			out.WriteString("//\t" + strings.TrimRight(l, " \n") + "\n")
		}
	}
	return out.String()
}

// checkOpTable compares the generated table with doc.go's, or rewrites
// doc.go with OOC_UPDATE_DOC=1.
func checkOpTable(t *testing.T, table map[string]map[string]bool, unsupported map[string]string) {
	t.Helper()
	want := opTable(table, unsupported)
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(src)
	at := strings.Index(doc, tableIntro)
	if at < 0 {
		t.Fatalf("doc.go has no line starting %q", tableIntro)
	}
	start := at + strings.Index(doc[at:], "\n//\n") + len("\n//\n")
	end := start
	for end < len(doc) && strings.HasPrefix(doc[end:], "//\t") {
		end += strings.Index(doc[end:], "\n") + 1
	}
	if got := doc[start:end]; got != want {
		if os.Getenv("OOC_UPDATE_DOC") == "1" {
			if err := os.WriteFile("doc.go", []byte(doc[:start]+want+doc[end:]), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Log("doc.go's op table rewritten")
			return
		}
		t.Errorf("doc.go's op table is not what the plans do; OOC_UPDATE_DOC=1 go test -run TestCoverage ./vm/cuda/dispatch rewrites it. Generated:\n%s\ndoc.go:\n%s", want, got)
	}
}
