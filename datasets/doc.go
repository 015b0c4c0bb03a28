// Package datasets feeds training and evaluation with batches in the shape a
// model's input node wants: X as (N, C, H, W) float32 or float64, and the
// target both as class indices and as a one-hot tensor, (N, Classes) for
// classification or (N, Classes, H, W) for segmentation.
//
// Sources implement Dataset, a random-access list of examples at their native
// size with pixels in [0, 1]:
//
//   - Synthetic: generated from a seed, nothing stored; class-dependent smooth
//     patterns (or coloured rectangles with masks) that a network can learn, so
//     tests and benchmarks train on something meaningful without any files.
//   - CIFAR10: the binary version (data_batch_1..5.bin, test_batch.bin).
//   - ImageFolder: one sub-folder of PNG/JPEG files per class.
//   - Segmentation: images/ and masks/ paired by file name, for U-Net.
//   - IDX, MNIST, FashionMNIST: the MNIST file format, plain or gzip. Debian's
//     dataset-fashion-mnist package installs Fashion-MNIST in
//     DefaultFashionMNISTDir.
//
// Open turns a command-line spec ("cifar10:DIR", "fashion-mnist", ...) into a
// Dataset, and NewLoader wraps any Dataset in the common batch iterator.
//
// # Determinism
//
// Training runs must be reproducible and resumable bit for bit, so nothing here
// depends on timing, goroutine scheduling or math/rand's version-dependent
// streams: the order of an epoch is a function of (Seed, epoch) and the
// augmentation of an example a function of (Seed, epoch, position in the
// epoch), both drawn from a splitmix64 generator in this package. Resuming at
// Options.StartEpoch/StartBatch therefore reproduces the uninterrupted run,
// and the number of prefetch workers does not change a single bit.
//
// # Errors
//
// Data on disk is untrusted. Files are validated when a dataset is opened
// where that is cheap (whole CIFAR and IDX files, image headers), so a bad
// file fails before the first step rather than hours into an epoch. A corrupt
// or truncated file is a *FormatError naming the file and the byte offset or
// entry; a missing one is an error wrapping fs.ErrNotExist that names the path.
// Loader.Next reports errors instead of panicking, even when a user-supplied
// Dataset panics.
//
// # Memory
//
// The prefetch goroutine runs at most Options.Prefetch batches ahead, and each
// Batch is freshly allocated, because the caller may hand the tensors to a
// graph that keeps them beyond the next step.
package datasets
