package datasets

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

type folder struct {
	info   Info
	files  []string
	labels []int
}

// splitDir picks dir/<split> when dir is laid out as train/ and test/
// sub-directories; otherwise dir itself is the training data and there is no
// test split. A class folder named "train" holds files, not folders, which is
// how the two layouts are told apart.
func splitDir(dir string, split Split, probe string) (string, error) {
	sub := filepath.Join(dir, split.String())
	if isDir(sub) && hasSubdir(sub) && (probe == "" || isDir(filepath.Join(sub, probe))) {
		return sub, nil
	}
	if split == Train {
		return dir, nil
	}
	return "", fmt.Errorf("datasets: %s has no %s/ sub-directory: %w", dir, split, ErrNoSplit)
}

func hasSubdir(dir string) bool {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range ents {
		if e.IsDir() {
			return true
		}
	}
	return false
}

// ImageFolder reads dir/<class>/... PNG and JPEG files; the sorted sub-folder
// names are the class indices, as in torchvision's ImageFolder. If dir has
// train/ and test/ sub-directories each laid out that way, split picks one.
// Every image header is read now, so a corrupt or oversized file is reported
// before training starts; pixels are decoded lazily by Load.
func ImageFolder(dir string, split Split) (Dataset, error) {
	root, err := splitDir(dir, split, "")
	if err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("datasets: folder: %w", err)
	}
	f := &folder{info: Info{Name: "folder", Split: split, Dir: root}}
	for _, e := range ents {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			f.info.ClassNames = append(f.info.ClassNames, e.Name())
		}
	}
	sort.Strings(f.info.ClassNames)
	if len(f.info.ClassNames) == 0 {
		return nil, fmt.Errorf("datasets: folder: %s has no class sub-directories", root)
	}
	f.info.Classes = len(f.info.ClassNames)
	for k, class := range f.info.ClassNames {
		files, err := listImages(filepath.Join(root, class))
		if err != nil {
			return nil, err
		}
		for _, p := range files {
			f.files = append(f.files, p)
			f.labels = append(f.labels, k)
		}
	}
	if len(f.files) == 0 {
		return nil, fmt.Errorf("datasets: folder: no .png, .jpg or .jpeg files under %s", root)
	}
	f.info.Examples = len(f.files)
	f.info.Channels = 1
	for i, p := range f.files {
		cfg, err := readImageConfig(p)
		if err != nil {
			return nil, entryErr(err, i)
		}
		if !cfg.gray {
			f.info.Channels = 3
		}
		if i == 0 {
			f.info.Height, f.info.Width = cfg.height, cfg.width
		} else if cfg.height != f.info.Height || cfg.width != f.info.Width {
			f.info.Height, f.info.Width = -1, -1
		}
	}
	if f.info.Height < 0 {
		f.info.Height, f.info.Width = 0, 0
	}
	return f, nil
}

// listImages walks a class folder recursively in lexical order, skipping
// hidden entries (editor and OS droppings such as .DS_Store).
func listImages(dir string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.HasPrefix(d.Name(), ".") && p != dir {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() && imageExt(d.Name()) {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("datasets: folder: %w", err)
	}
	return out, nil
}

// entryErr records which example a file error belongs to.
func entryErr(err error, i int) error {
	var fe *FormatError
	if errors.As(err, &fe) && fe.Entry < 0 {
		fe.Entry = i
		return fe
	}
	if errors.As(err, &fe) {
		return fe
	}
	return fmt.Errorf("datasets: entry %d: %w", i, err)
}

func (f *folder) Info() Info { return f.info }

func (f *folder) Load(i int) (Example, error) {
	if err := checkIndex("folder", i, f.info.Examples); err != nil {
		return Example{}, err
	}
	pix, c, h, w, err := loadImage(f.files[i], i)
	if err != nil {
		return Example{}, err
	}
	return Example{Image: pix, Channels: c, Height: h, Width: w, Label: f.labels[i]}, nil
}
