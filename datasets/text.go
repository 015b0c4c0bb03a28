package datasets

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf8"
)

// TextUnit is how a corpus is cut into tokens.
type TextUnit int

const (
	// Chars makes every character (UTF-8 rune, newlines included) a token: a character model.
	Chars TextUnit = iota
	// Words splits each line at white space and ends it with an "<eos>" token, as PyTorch's
	// word_language_model reads the Penn Treebank.
	Words
)

func (u TextUnit) String() string {
	if u == Words {
		return "words"
	}
	return "chars"
}

// UnknownToken is the vocabulary's last entry: test tokens the training text never had map to it.
const UnknownToken = "<unk>"

// DefaultSeqLen is the sequence length when none is given (Zaremba et al.'s 35 steps).
const DefaultSeqLen = 35

// Text reads a plain-text corpus for a language model. path is a UTF-8 file (the training split;
// it has no test split) or a directory whose *train*.txt file is the training split and
// *test*.txt (failing that *valid*.txt) the test split, as the Penn Treebank's ptb.train.txt,
// ptb.valid.txt and ptb.test.txt.
//
// The vocabulary is the training text's distinct tokens, sorted, plus UnknownToken; token ids
// index Info.ClassNames. The text is cut into consecutive windows of seqLen tokens: example i
// holds tokens [i*seqLen, (i+1)*seqLen) as ids and, as its per-position targets, the tokens one
// further on, so there are (tokens-1)/seqLen examples. An example is a one-pixel-high,
// seqLen-wide, one-channel "image" of ids with a segmentation mask of targets, which is what
// models' lstm reads (Input ids (N,1,1,T), Labels one-hot (N,Vocab,1,T)) and what a Loader
// produces unchanged, without normalisation (leave Options.Mean and Std unset, and do not crop
// or flip).
func Text(path string, split Split, seqLen int, unit TextUnit) (Dataset, error) {
	if seqLen < 1 {
		return nil, fmt.Errorf("datasets: text: sequence length %d must be positive", seqLen)
	}
	trainFile, testFile, err := textFiles(path)
	if err != nil {
		return nil, err
	}
	train, err := readText(trainFile)
	if err != nil {
		return nil, err
	}
	vocab := vocabulary(tokenize(train, unit))
	file, data := trainFile, train
	if split == Test {
		if testFile == "" {
			return nil, fmt.Errorf("datasets: text: %s has no test text: %w: %w", path, ErrNoSplit, fs.ErrNotExist)
		}
		file = testFile
		if data, err = readText(testFile); err != nil {
			return nil, err
		}
	}
	index := make(map[string]int, len(vocab))
	for i, t := range vocab {
		index[t] = i
	}
	toks := tokenize(data, unit)
	ids := make([]int32, len(toks))
	for i, t := range toks {
		id, ok := index[t]
		if !ok {
			id = len(vocab) - 1
		}
		ids[i] = int32(id)
	}
	n := (len(ids) - 1) / seqLen
	if n < 1 {
		return nil, fmt.Errorf("datasets: text: %s has %d %s, fewer than one sequence of %d plus its target", file, len(ids), unit, seqLen)
	}
	return &text{ids: ids, seq: seqLen, info: Info{Name: "text", Split: split, Examples: n, Classes: len(vocab), Channels: 1,
		Height: 1, Width: seqLen, ClassNames: vocab, Segmentation: true, Dir: filepath.Dir(file)}}, nil
}

// textFiles finds the training and (possibly no) test file.
func textFiles(path string) (train, test string, err error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", "", fmt.Errorf("datasets: text: %w", err)
	}
	if !st.IsDir() {
		return path, "", nil
	}
	find := func(part string) string {
		m, _ := filepath.Glob(filepath.Join(path, "*"+part+"*.txt"))
		sort.Strings(m)
		if len(m) == 0 {
			return ""
		}
		return m[0]
	}
	if train = find("train"); train == "" {
		return "", "", fmt.Errorf("datasets: text: no *train*.txt in %s: %w", path, fs.ErrNotExist)
	}
	if test = find("test"); test == "" {
		test = find("valid")
	}
	return train, test, nil
}

func readText(file string) ([]byte, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("datasets: text: %w", err)
	}
	if !utf8.Valid(data) {
		i := 0
		for i < len(data) {
			r, size := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && size <= 1 {
				break
			}
			i += size
		}
		return nil, &FormatError{File: file, Offset: int64(i), Entry: -1, Msg: "not UTF-8 text"}
	}
	return data, nil
}

func tokenize(data []byte, unit TextUnit) []string {
	var toks []string
	if unit == Chars {
		for _, r := range string(data) {
			toks = append(toks, string(r))
		}
		return toks
	}
	for _, line := range bytes.Split(data, []byte("\n")) {
		f := strings.Fields(string(line))
		if len(f) == 0 {
			continue
		}
		toks = append(append(toks, f...), "<eos>")
	}
	return toks
}

// vocabulary is the sorted distinct tokens, then UnknownToken (once).
func vocabulary(toks []string) []string {
	seen := map[string]bool{UnknownToken: true}
	var v []string
	for _, t := range toks {
		if !seen[t] {
			seen[t] = true
			v = append(v, t)
		}
	}
	sort.Strings(v)
	return append(v, UnknownToken)
}

type text struct {
	ids  []int32
	seq  int
	info Info
}

func (t *text) Info() Info { return t.info }

func (t *text) Load(i int) (Example, error) {
	if err := checkIndex("text", i, t.info.Examples); err != nil {
		return Example{}, err
	}
	x, y := make([]float32, t.seq), make([]int, t.seq)
	for k := range x {
		x[k] = float32(t.ids[i*t.seq+k])
		y[k] = int(t.ids[i*t.seq+k+1])
	}
	return Example{Image: x, Channels: 1, Height: 1, Width: t.seq, Label: -1, Mask: y}, nil
}
