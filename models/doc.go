// Package models builds training graphs for the networks the out-of-core papers measure.
//
// Build returns a Gorgonia graph holding the forward pass, a softmax cross-entropy loss and its
// backward (gorgonia.Grad of the loss with respect to every learnable), with only the weights
// allocated: no activation-sized memory is touched until a machine runs the graph, so even the
// paper's ResNet-50 at batch 1440 and 224x224 builds (its heap grows by its 97.5 MiB of weights)
// and can be planned on a small machine. The graph runs on gorgonia's TapeMachine or on
// ooc.Compile's machine, which gives the same results bit for bit.
//
//	m, err := models.Build("resnet50", models.Config{Batch: 32, Channels: 3, Height: 224, Width: 224, Classes: 1000})
//	gorgonia.Let(m.Input, images) // (Batch, Channels, Height, Width)
//	gorgonia.Let(m.Labels, onehot) // (Batch, Classes); (Batch, Classes, Height, Width) for unet
//	machine, err := ooc.Compile(m.Graph, ooc.BindDualValues(m.Learnables...), ooc.WithBudget(budget))
//
// Every model is made of the lean ops of package models/layers (one-node convolution whose im2col
// is a declared workspace, batch norm with its affine in one op, ReLU, pools that keep no argmax,
// transposed convolution, the losses), not of gorgonia's Conv2d/BatchNorm/MaxPool2D, which keep
// several times more memory alive (see the layers package documentation). Batch norm runs in
// training mode (batch statistics); its scale and shift are learnables, its running statistics are
// not: they live in the ops (Model.BatchNorms), are updated by every training forward, and are used
// after Model.SetTraining(false). Weights are drawn from Config.Seed in layer order, with
// torchvision's initialisation for the torchvision models, so equal configs give equal models.
// Learnables are in creation order (torchvision's parameters() order) and named as torchvision
// names them ("layer1.0.conv1.weight", "features.denseblock1.denselayer1.norm1.bias", …), except
// that a linear layer's weight is stored (in, out), the transpose of PyTorch's.
//
// # The models
//
// At 3x224x224 input and 1000 classes the learnable counts equal torchvision's exactly (for
// Inception at its 299x299).
//
//   - resnet18, resnet34 (basic blocks) and resnet50, resnet101, resnet152 (bottleneck blocks):
//     He et al., "Deep Residual Learning for Image Recognition" (2016), as torchvision builds them
//     (the "v1.5" bottleneck with the stride on its 3x3 convolution; 1x1 convolution and batch norm
//     on the shortcut where the shape changes; global average pooling; a linear classifier).
//     11,689,512 / 21,797,672 / 25,557,032 / 44,549,160 / 60,192,808 parameters. Any input size
//     works (a 32x32 image reaches the last stage as 1x1). Unlike PyTorch, batch norm over a
//     single value per channel (batch 1 with a 1x1 map) is not an error: it yields the shift.
//
//   - densenet121, densenet169, densenet201: Huang et al., "Densely Connected Convolutional
//     Networks" (2017), DenseNet-BC as torchvision: growth rate 32, 64 stem features, bottleneck
//     width 4x32, transitions halving the channels, blocks of 6-12-24-16 / 6-12-32-32 / 6-12-48-32
//     layers. 7,978,856 / 14,149,480 / 20,013,928 parameters. Each dense layer concatenates all
//     earlier feature maps of its block (torchvision's default memory_efficient=False, so the
//     activation memory grows quadratically with the block length). Dropout (0 in torchvision)
//     is omitted. Height and width must be at least 29 (the stem and three 2x2 pools).
//
//   - vgg16: Simonyan and Zisserman, "Very Deep Convolutional Networks for Large-Scale Image
//     Recognition" (2015), configuration D without batch norm, as torchvision's vgg16: thirteen
//     3x3 convolutions with bias and ReLU, five 2x2 max-pools, and the classifier
//     4096-ReLU-4096-ReLU-Classes. 138,357,544 parameters. Deviations: the classifier's two dropout
//     layers are omitted (gorgonia's dropout has a wrong gradient and a clock-seeded RNG; without
//     it a step is deterministic and equals the TapeMachine bit for bit). torchvision pools the
//     last feature map adaptively to 7x7, which for other input sizes than 224 replicates or
//     averages pixels; here a map whose sides are equal multiples of 7 (224, 448, …) is
//     average-pooled to 7x7, exactly as torchvision, and any other map is flattened as it is,
//     so the first classifier layer reads 512·h·w features (512 at 32x32, as the CIFAR variants of
//     VGG) and the parameter count differs from torchvision's. Height and width must be at least 32.
//
//   - unet: Ronneberger et al., "U-Net: Convolutional Networks for Biomedical Image Segmentation"
//     (2015) with padded convolutions, so the output has the input's size: four levels of two 3x3
//     convolutions with bias and ReLU (64, 128, 256, 512 channels) with 2x2 max-pools between
//     them, a 1024-channel bottom, four levels up of a 2x2 stride-2 transposed convolution halving
//     the channels, concatenation with the same level's features and two 3x3 convolutions, and a
//     1x1 convolution to Classes scores per pixel. There is no batch norm (the paper has none) and
//     the paper's dropout at the end of the contracting path is omitted. The loss is the per-pixel
//     softmax cross-entropy over Classes averaged over the batch and the pixels, and Labels are
//     (Batch, Classes, Height, Width) one-hot. Height and width must be divisible by 16. 31,031,810
//     parameters for 3 input channels and 2 classes (31,096,680 for 1000 classes).
//
//   - smallcnn: a quick model for the CPU (the README's main job, the examples and benchmarks):
//     conv-bn-relu (16 channels), a residual block of two conv-bn with ReLU, a 2x2 max-pool, a
//     conv-bn-relu whose output is concatenated with its input (32 channels), another 2x2
//     max-pool and a linear classifier over the flattened map. Height and width must be
//     multiples of 4.
//
//   - inceptionv3, inceptionv3-noaux: Szegedy et al., "Rethinking the Inception Architecture for
//     Computer Vision" (2016), as torchvision's inception_v3 (BasicConv2d = bias-free convolution,
//     batch norm with eps 0.001, ReLU; Mixed_5b..Mixed_7c; weights N(0, 0.1²) truncated at ±2;
//     transform_input off; dropout omitted). inceptionv3 has the auxiliary classifier on Mixed_6e
//     and its loss is the main cross-entropy plus 0.4 times the auxiliary one, as torchvision's
//     reference training; it needs inputs of at least 299x299 (the auxiliary head's 5x5
//     convolution). inceptionv3-noaux leaves it out and takes 75x75 and up. 27,161,264 /
//     23,834,568 parameters at 1000 classes, torchvision's counts.
//
//   - deeplabv3plus: Chen et al., "Encoder-Decoder with Atrous Separable Convolution for Semantic
//     Image Segmentation" (2018) on torchvision's ResNet-101 at output stride 16 (layer4 at
//     layer3's resolution, its 3x3 convolutions dilated 2, 4, 8: rate 2 with DeepLabv3's
//     multi-grid), ASPP (1x1; 3x3 at rates 6, 12, 18; image pooling; 256 channels each, projected
//     to 256), and the decoder (48-channel 1x1 on layer1's output, two 3x3 of 256, a 1x1 with bias
//     to Classes), with bilinear upsampling (corners aligned), named as the common PyTorch
//     implementation (jfzhang95/pytorch-deeplab-xception). Per-pixel loss and one-hot Labels as
//     unet. 59,344,309 parameters at PASCAL VOC's 21 classes. Dropout omitted.
//
//   - pix2pixhd: Wang et al., "High-Resolution Image Synthesis and Semantic Manipulation with
//     Conditional GANs" (2018): the global generator (reflection-padded 7x7 convolution, four
//     stride-2 downsamplings to 1024 channels, nine residual blocks, four transposed-convolution
//     upsamplings, a 7x7 convolution and tanh; instance norm and ReLU between) against the
//     two-scale PatchGAN discriminator (4x4 convolutions, LeakyReLU 0.2, instance norm, the second
//     scale on a 3x3/2 average-pooled input), with Pix2PixHD's LSGAN and feature-matching losses
//     (weight 10). Input is the real image (Batch, Channels, H, W) in [-1, 1], Labels the one-hot
//     label map (Batch, Classes, H, W) the generator translates (Cityscapes: 35 label ids), so an
//     image/label-map data set feeds it as it feeds unet; Generated is the generator's output and
//     there are no Logits. Height and width must be multiples of 16, at least 32; the paper's
//     Cityscapes size for the global generator is 1024x512. Without instance maps (Pix2PixHD's
//     --no_instance) and without its VGG perceptual loss (--no_vgg_loss: it needs a pretrained
//     VGG-19). 188,144,773 parameters for 35 label ids and RGB: 182,543,619 in the generator,
//     5,601,154 in the discriminator.
//
//   - lstm: a word or character language model (Zaremba et al. 2014, PyTorch's
//     word_language_model): an embedding of width Hidden, two LSTM layers of width Hidden unrolled
//     over SeqLen steps in the graph, and a decoder to Vocab scores at every step; loss the mean
//     per-token cross-entropy; each sequence starts from a zero state. Input is (Batch, 1, 1,
//     SeqLen) token ids, Labels the one-hot next tokens (Batch, Vocab, 1, SeqLen) (see Config).
//     19,780,400 parameters for Zaremba's medium model (Vocab 10000, Hidden 650).
//
// # One graph for a GAN step
//
// The usual Pix2PixHD iteration computes all losses from the same weights, then steps the
// generator on its loss L_G and the discriminator on its loss L_D. Here the graph has the one cost
// L_G + L_D and gorgonia.Grad differentiates it with respect to both players' weights; three
// StopGradient walls make each weight's gradient its own player's loss's:
//
//   - L_D reads the discriminator on StopGradient(fake): the generator gets nothing from L_D;
//   - L_G runs the discriminator a third time (on the fake, as PyTorch's Pix2PixHD does) through
//     StopGradient of every discriminator weight: the discriminator gets nothing from L_G's GAN
//     term;
//   - feature matching compares that pass's features with StopGradient of the real image's
//     (computed once, in L_D's pass): the discriminator gets nothing from it either.
//
// So ∂(L_G+L_D)/∂θ_G = ∂L_G/∂θ_G and ∂(L_G+L_D)/∂θ_D = ∂L_D/∂θ_D, both at the same weights, and one
// solver step over all learnables is exactly the simultaneous update Pix2PixHD's alternating code
// performs (its D step uses losses computed before the G step; with one Adam per player, as there,
// Adam's per-weight state makes one solver over both the same thing). TestPix2PixHDGradients
// checks each weight's gradient against finite differences of its own player's loss.
//
// An unknown name, a non-positive size, a dtype other than float32 and float64, or an input the
// architecture cannot take is an error naming the model and the size; Build never panics.
//
// # Memory
//
// Measured with ooc.Plan(m.Graph, ooc.Baseline()) (the liveness peak of the in-core program,
// each tensor freed after its last use, im2col workspaces included; weights are not counted):
// ResNet-50 at 3x224x224 needs 80.6 MiB per image (1289 MiB at batch 16, 113.3 GiB at batch
// 1440). The peak is at the start of the backward, where the forward's saved tensors are all
// alive: the ReLU outputs (read by the next convolution's weight gradient and by ReLU's own
// gradient, about 37 MiB per image) and the convolution outputs that batch norm's backward reads
// (about 42 MiB per image, most of them the 1x1 convolutions' wide outputs).
package models
