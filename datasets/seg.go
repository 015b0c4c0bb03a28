package datasets

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

type segPairs struct {
	info   Info
	images []string
	masks  []string
}

// Segmentation reads image/mask pairs for U-Net style training: dir/images/
// and dir/masks/ (or dir/train/... and dir/test/... chosen by split), matched
// by file name without extension, so a.jpg pairs with a.png. Masks are PNG
// (JPEG would blur the class values), palette or gray, pixel value = class.
//
// classes > 0 fixes the class count; otherwise dir/classes.txt (one name per
// line) gives it, and failing that every mask is decoded once to find the
// largest class index.
func Segmentation(dir string, split Split, classes int) (Dataset, error) {
	root, err := splitDir(dir, split, "images")
	if err != nil {
		return nil, err
	}
	s, err := pairImages("seg", split, root, filepath.Join(root, "images"), filepath.Join(root, "masks"), nil)
	if err != nil {
		return nil, err
	}
	switch {
	case classes > 0:
		s.info.Classes = classes
	default:
		if names, ok := readLines(filepath.Join(root, "classes.txt")); ok {
			s.info.ClassNames = names
		} else if names, ok := readLines(filepath.Join(dir, "classes.txt")); ok {
			s.info.ClassNames = names
		}
		s.info.Classes = len(s.info.ClassNames)
		if s.info.Classes == 0 {
			for i, m := range s.masks {
				mask, _, _, err := loadMask(m, i)
				if err != nil {
					return nil, err
				}
				for _, v := range mask {
					s.info.Classes = max(s.info.Classes, v+1)
				}
			}
		}
	}
	return s, nil
}

// pairImages pairs the images of imgDir with the masks of maskDir by file name without
// extension, after key (nil: the name itself) maps each to what they share, and reads every
// header: the dataset's examples, channels and size. Masks must be PNG.
func pairImages(name string, split Split, root, imgDir, maskDir string, key func(string) string) (*segPairs, error) {
	for _, d := range []string{imgDir, maskDir} {
		if !isDir(d) {
			return nil, fmt.Errorf("datasets: %s: missing directory %s (want %s and %s): %w", name, d, imgDir, maskDir, fs.ErrNotExist)
		}
	}
	imgs, err := stems(name, imgDir, imageExt, key)
	if err != nil {
		return nil, err
	}
	masks, err := stems(name, maskDir, imageExt, key)
	if err != nil {
		return nil, err
	}
	s := &segPairs{info: Info{Name: name, Split: split, Segmentation: true, Dir: root}}
	keys := make([]string, 0, len(imgs))
	for k := range imgs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		m, ok := masks[k]
		if !ok {
			want := "a mask in " + maskDir
			if key == nil {
				want = "mask " + filepath.Join(maskDir, k+".png")
			}
			return nil, fmt.Errorf("datasets: %s: image %s has no %s", name, imgs[k], want)
		}
		if !strings.EqualFold(filepath.Ext(m), ".png") {
			return nil, fmt.Errorf("datasets: %s: mask %s must be PNG: lossy JPEG changes class values", name, m)
		}
		s.images = append(s.images, imgs[k])
		s.masks = append(s.masks, m)
	}
	mkeys := make([]string, 0, len(masks))
	for k := range masks {
		mkeys = append(mkeys, k)
	}
	sort.Strings(mkeys)
	for _, k := range mkeys {
		if _, ok := imgs[k]; !ok {
			return nil, fmt.Errorf("datasets: %s: mask %s has no image in %s", name, masks[k], imgDir)
		}
	}
	if len(s.images) == 0 {
		return nil, fmt.Errorf("datasets: %s: no images in %s", name, imgDir)
	}
	s.info.Examples = len(s.images)
	s.info.Channels = 1
	for i := range s.images {
		ic, err := readImageConfig(s.images[i])
		if err != nil {
			return nil, entryErr(err, i)
		}
		mc, err := readImageConfig(s.masks[i])
		if err != nil {
			return nil, entryErr(err, i)
		}
		if ic.width != mc.width || ic.height != mc.height {
			return nil, formatErr(s.masks[i], -1, i, "mask is %dx%d but image %s is %dx%d",
				mc.width, mc.height, s.images[i], ic.width, ic.height)
		}
		if !ic.gray {
			s.info.Channels = 3
		}
		if i == 0 {
			s.info.Height, s.info.Width = ic.height, ic.width
		} else if ic.height != s.info.Height || ic.width != s.info.Width {
			s.info.Height, s.info.Width = -1, -1
		}
	}
	if s.info.Height < 0 {
		s.info.Height, s.info.Width = 0, 0
	}
	return s, nil
}

// stems maps a file's path relative to dir, without extension (and through key, if not nil), to
// its path.
func stems(name, dir string, keep func(string) bool, key func(string) string) (map[string]string, error) {
	out := map[string]string{}
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
		if !d.Type().IsRegular() || !keep(d.Name()) {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		k := strings.TrimSuffix(rel, filepath.Ext(rel))
		if key != nil {
			k = key(k)
		}
		if prev, dup := out[k]; dup {
			return fmt.Errorf("%s and %s have the same name; pairs are matched by name", prev, p)
		}
		out[k] = p
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("datasets: %s: %w", name, err)
	}
	return out, nil
}

func readLines(path string) ([]string, bool) {
	f, err := os.Open(path)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if s := strings.TrimSpace(sc.Text()); s != "" {
			out = append(out, s)
		}
	}
	return out, sc.Err() == nil && len(out) > 0
}

// loadImage reads and decodes entry's image file.
func loadImage(path string, entry int) (pix []float32, c, h, w int, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, 0, 0, 0, entryErr(err, entry)
	}
	if pix, c, h, w, err = decodeImage(path, data); err != nil {
		return nil, 0, 0, 0, entryErr(err, entry)
	}
	return pix, c, h, w, nil
}

// loadMask reads and decodes entry's mask file.
func loadMask(path string, entry int) (mask []int, h, w int, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, 0, 0, entryErr(err, entry)
	}
	if mask, h, w, err = decodeMask(path, data); err != nil {
		return nil, 0, 0, entryErr(err, entry)
	}
	return mask, h, w, nil
}

func (s *segPairs) Info() Info { return s.info }

func (s *segPairs) Load(i int) (Example, error) {
	if err := checkIndex(s.info.Name, i, s.info.Examples); err != nil {
		return Example{}, err
	}
	pix, c, h, w, err := loadImage(s.images[i], i)
	if err != nil {
		return Example{}, err
	}
	mask, mh, mw, err := loadMask(s.masks[i], i)
	if err != nil {
		return Example{}, err
	}
	if mh != h || mw != w {
		return Example{}, formatErr(s.masks[i], -1, i, "mask is %dx%d but image %s is %dx%d", mw, mh, s.images[i], w, h)
	}
	for p, v := range mask {
		if v >= s.info.Classes {
			return Example{}, formatErr(s.masks[i], -1, i, "pixel (%d,%d) has class %d, want 0..%d", p%w, p/w, v, s.info.Classes-1)
		}
	}
	return Example{Image: pix, Channels: c, Height: h, Width: w, Label: -1, Mask: mask}, nil
}
