package datasets

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
)

// CityscapesLabelIDs is the number of Cityscapes label ids (0..33 plus the license plate's),
// Pix2PixHD's label_nc for Cityscapes.
const CityscapesLabelIDs = 35

// Cityscapes reads a label-map data set laid out as Pix2PixHD prepares Cityscapes:
// dir/train_label/ holding label-id PNGs (a pixel's value is its class) and dir/train_img/ the
// photographs, dir/test_label/ and dir/test_img/ for the test split. Pairs are matched by file
// name without extension, after the Cityscapes suffixes "_gtFine_labelIds" and "_leftImg8bit" are
// dropped, so aachen_000000_000019_gtFine_labelIds.png pairs with
// aachen_000000_000019_leftImg8bit.png (files named alike pair too).
//
// Examples are segmentation examples (the image and its mask), so a Loader gives X, the images,
// normalised to [-1, 1] with Info.Mean and Info.Std of 0.5 as Pix2PixHD does, and Y, the one-hot
// label maps: the real images and the conditions a label-to-image GAN trains on (models'
// pix2pixhd takes them in that order). classes > 0 fixes the class count, otherwise it is
// CityscapesLabelIDs; a label outside it is an error naming the file and pixel when loaded.
func Cityscapes(dir string, split Split, classes int) (Dataset, error) {
	labels := filepath.Join(dir, split.String()+"_label")
	images := filepath.Join(dir, split.String()+"_img")
	if split == Test && !isDir(labels) {
		return nil, fmt.Errorf("datasets: cityscapes: %s has no test_label/ directory: %w: %w", dir, ErrNoSplit, fs.ErrNotExist)
	}
	s, err := pairImages("cityscapes", split, dir, images, labels, cityscapesKey)
	if err != nil {
		return nil, err
	}
	s.info.Classes = CityscapesLabelIDs
	if classes > 0 {
		s.info.Classes = classes
	}
	s.info.Mean, s.info.Std = []float64{0.5}, []float64{0.5}
	return s, nil
}

// cityscapesKey is what a Cityscapes image and its label-id map share in their names.
func cityscapesKey(stem string) string {
	for _, suffix := range []string{"_gtFine_labelIds", "_leftImg8bit"} {
		stem = strings.TrimSuffix(stem, suffix)
	}
	return stem
}
