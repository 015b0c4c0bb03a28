package dispatch_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/ooc"
)

// unplanned are gorgonia op types that have no plan and no coverage row
// because no program can bring them to the dispatch; the test named in each
// reason checks that this is still so. The op table lists them.
var unplanned = map[string]string{
	"gorgonia.clampOp": "none: built by no function of gorgonia v0.9.18, and its Do returns nothing (TestClampOpIsBuiltByNothing)",
	"gorgonia.yoloOp":  "none: ooc.Compile refuses YOLOv3 on every device, its op rewriting its operand in place (TestYOLOv3RefusedOnEveryDevice)",
}

// TestClampOpIsBuiltByNothing reads gorgonia's source: clampOp is declared,
// its Do is "return nil, nil", and no file of the package (tests aside)
// makes one (no clampOp{...} literal, no new(clampOp)); the type is
// unexported, so no program outside gorgonia can make one either.
func TestClampOpIsBuiltByNothing(t *testing.T) {
	file, _ := runtime.FuncForPC(reflect.ValueOf(G.NewGraph).Pointer()).FileLine(reflect.ValueOf(G.NewGraph).Pointer())
	dir := filepath.Dir(file)
	if _, err := os.Stat(filepath.Join(dir, "op_nn.go")); err != nil {
		t.Skipf("gorgonia's source is not at %s (a -trimpath build?): %v", dir, err)
	}
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	declared, doEmpty := false, false
	var built []string
	for _, pkg := range pkgs {
		for _, f := range pkg.Files {
			ast.Inspect(f, func(n ast.Node) bool {
				switch x := n.(type) {
				case *ast.TypeSpec:
					declared = declared || x.Name.Name == "clampOp"
				case *ast.FuncDecl:
					if x.Name.Name == "Do" && x.Recv != nil && strings.Contains(typeString(x.Recv.List[0].Type), "clampOp") {
						doEmpty = len(x.Body.List) == 1 && returnsNils(x.Body.List[0])
					}
				case *ast.CompositeLit:
					if typeString(x.Type) == "clampOp" {
						built = append(built, fset.Position(x.Pos()).String())
					}
				case *ast.CallExpr:
					if id, ok := x.Fun.(*ast.Ident); ok && id.Name == "new" && len(x.Args) == 1 && typeString(x.Args[0]) == "clampOp" {
						built = append(built, fset.Position(x.Pos()).String())
					}
				}
				return true
			})
		}
	}
	if !declared {
		t.Fatalf("gorgonia at %s has no clampOp: another version; recheck whether it needs a plan", dir)
	}
	if !doEmpty {
		t.Errorf("clampOp's Do is no longer \"return nil, nil\": it computes something; give it a plan")
	}
	if len(built) > 0 {
		t.Errorf("gorgonia now makes a clampOp at %v: give it a plan and a coverage row", built)
	}
}

func typeString(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.StarExpr:
		return "*" + typeString(x.X)
	}
	return ""
}

func returnsNils(s ast.Stmt) bool {
	r, ok := s.(*ast.ReturnStmt)
	if !ok || len(r.Results) != 2 {
		return false
	}
	for _, e := range r.Results {
		if id, ok := e.(*ast.Ident); !ok || id.Name != "nil" {
			return false
		}
	}
	return true
}

// TestYOLOv3RefusedOnEveryDevice: ooc refuses gorgonia's YOLOv3 before any
// backend plans it (ooc/trace.go: its op writes its activations into its
// operand and returns that operand), on the CPU device and the fake CUDA
// device alike, with the same error; the day ooc runs it on the CPU, yoloOp
// needs a CUDA plan and a coverage row.
func TestYOLOv3RefusedOnEveryDevice(t *testing.T) {
	d := openFake(t)
	compile := func(opts ...ooc.Option) error {
		g := G.NewGraph()
		x := G.NewTensor(g, tensor.Float32, 4, G.WithShape(1, 21, 4, 4), G.WithName("x"),
			G.WithValue(tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(1, 21, 4, 4))))
		y, err := G.YOLOv3(x, []float32{10, 13, 16, 30, 33, 23}, []int{0, 1, 2}, 32, 2, 0.5)
		if err != nil {
			t.Fatal(err)
		}
		var out G.Value
		G.Read(y, &out)
		m, err := ooc.Compile(g, append(opts, ooc.Inference())...)
		if err == nil {
			m.Close()
		}
		return err
	}
	cpu, gpu := compile(), compile(ooc.WithDevice(d))
	for _, c := range []struct {
		dev string
		err error
	}{{"CPU", cpu}, {"fake CUDA", gpu}} {
		if c.err == nil || !strings.Contains(c.err.Error(), "rewrites its operand in place") {
			t.Errorf("%s device: Compile gave %v, want ooc's refusal of YOLOv3: if ooc runs it now, plan yoloOp on CUDA", c.dev, c.err)
		}
	}
}
