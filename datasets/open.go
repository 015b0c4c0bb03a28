package datasets

import (
	"fmt"
	"strconv"
	"strings"
)

// Specs lists the forms Open accepts, for command-line help.
const Specs = "synthetic[:n=N,c=C,h=H,w=W,classes=K,seed=S,seg] | cifar10:DIR | folder:DIR | seg:DIR | fashion-mnist[:DIR] | mnist:DIR" +
	" | cityscapes:DIR | text:PATH[,seq=N][,words]"

// OpenOption adjusts Open. Shape, class and size options feed the synthetic
// source, which has no files to read them from; Classes also fixes the class
// count of "seg:DIR".
type OpenOption func(*openConfig)

type openConfig struct {
	split                   Split
	examples                int
	channels, height, width int
	classes                 int
	seed                    int64
	seg                     bool
}

// WithSplit selects the training (default) or test split.
func WithSplit(s Split) OpenOption { return func(c *openConfig) { c.split = s } }

// WithShape sets the synthetic image size; a CLI passes the model's input.
func WithShape(channels, height, width int) OpenOption {
	return func(c *openConfig) { c.channels, c.height, c.width = channels, height, width }
}

// WithClasses sets the class count of synthetic data and of "seg:DIR".
func WithClasses(n int) OpenOption { return func(c *openConfig) { c.classes = n } }

// WithExamples sets the number of synthetic examples.
func WithExamples(n int) OpenOption { return func(c *openConfig) { c.examples = n } }

// WithSeed sets the synthetic data seed.
func WithSeed(seed int64) OpenOption { return func(c *openConfig) { c.seed = seed } }

// WithSegmentation makes synthetic data carry masks (for U-Net).
func WithSegmentation(on bool) OpenOption { return func(c *openConfig) { c.seg = on } }

// Synthetic defaults when neither the spec nor an option says otherwise.
const (
	defaultSyntheticTrain = 1024
	defaultSyntheticTest  = 256
)

// Open opens a dataset from a spec string such as "cifar10:/data/cifar" (see
// Specs). Parameters written in a synthetic spec override the options.
func Open(spec string, opts ...OpenOption) (Dataset, error) {
	cfg := openConfig{channels: 3, height: 32, width: 32, classes: 0}
	for _, o := range opts {
		o(&cfg)
	}
	name, arg, hasArg := strings.Cut(spec, ":")
	needDir := func() error {
		if !hasArg || arg == "" {
			return fmt.Errorf("datasets: spec %q needs a directory: %s:DIR", spec, name)
		}
		return nil
	}
	switch strings.ToLower(name) {
	case "synthetic":
		return openSynthetic(spec, arg, cfg)
	case "cifar10", "cifar-10":
		if err := needDir(); err != nil {
			return nil, err
		}
		return CIFAR10(arg, cfg.split)
	case "folder":
		if err := needDir(); err != nil {
			return nil, err
		}
		return ImageFolder(arg, cfg.split)
	case "seg":
		if err := needDir(); err != nil {
			return nil, err
		}
		return Segmentation(arg, cfg.split, cfg.classes)
	case "fashion-mnist", "fashionmnist":
		return FashionMNIST(arg, cfg.split)
	case "mnist":
		if err := needDir(); err != nil {
			return nil, err
		}
		return MNIST(arg, cfg.split)
	case "cityscapes":
		if err := needDir(); err != nil {
			return nil, err
		}
		return Cityscapes(arg, cfg.split, cfg.classes)
	case "text":
		if err := needDir(); err != nil {
			return nil, err
		}
		return openText(spec, arg, cfg.split)
	}
	return nil, fmt.Errorf("datasets: unknown dataset spec %q (want %s)", spec, Specs)
}

func openSynthetic(spec, arg string, cfg openConfig) (Dataset, error) {
	sc := SyntheticConfig{Examples: cfg.examples, Channels: cfg.channels, Height: cfg.height, Width: cfg.width,
		Classes: cfg.classes, Seed: cfg.seed, Split: cfg.split, Segmentation: cfg.seg}
	if arg != "" {
		for _, kv := range strings.Split(arg, ",") {
			k, v, hasV := strings.Cut(strings.TrimSpace(kv), "=")
			if k == "seg" {
				sc.Segmentation = true
				if hasV {
					b, err := strconv.ParseBool(v)
					if err != nil {
						return nil, fmt.Errorf("datasets: spec %q: seg=%q is not a boolean", spec, v)
					}
					sc.Segmentation = b
				}
				continue
			}
			if !hasV {
				return nil, fmt.Errorf("datasets: spec %q: %q is not key=value", spec, kv)
			}
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("datasets: spec %q: %s=%q is not an integer", spec, k, v)
			}
			if k != "seed" && (n < 0 || n > 1<<31) {
				return nil, fmt.Errorf("datasets: spec %q: %s=%d out of range", spec, k, n)
			}
			switch k {
			case "n":
				sc.Examples = int(n)
			case "c":
				sc.Channels = int(n)
			case "h":
				sc.Height = int(n)
			case "w":
				sc.Width = int(n)
			case "classes":
				sc.Classes = int(n)
			case "seed":
				sc.Seed = n
			default:
				return nil, fmt.Errorf("datasets: spec %q: unknown key %q (want n, c, h, w, classes, seed, seg)", spec, k)
			}
		}
	}
	if sc.Examples == 0 {
		sc.Examples = defaultSyntheticTrain
		if sc.Split == Test {
			sc.Examples = defaultSyntheticTest
		}
	}
	if sc.Classes == 0 {
		sc.Classes = 10
		if sc.Segmentation {
			sc.Classes = 2
		}
	}
	return Synthetic(sc)
}

// openText reads "PATH[,seq=N][,words|chars]": options after the last commas that parse as
// options, so a path may itself hold commas.
func openText(spec, arg string, split Split) (Dataset, error) {
	seq, unit := DefaultSeqLen, Chars
	for {
		i := strings.LastIndexByte(arg, ',')
		if i < 0 {
			break
		}
		opt := arg[i+1:]
		switch k, v, _ := strings.Cut(opt, "="); {
		case opt == "words":
			unit = Words
		case opt == "chars":
			unit = Chars
		case k == "seq":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 1<<20 {
				return nil, fmt.Errorf("datasets: spec %q: seq=%q is not a positive sequence length", spec, v)
			}
			seq = n
		default:
			return Text(arg, split, seq, unit)
		}
		arg = arg[:i]
	}
	return Text(arg, split, seq, unit)
}
