"""The card of denoiser training (:mod:`rsbench.methods.denoiser`), denoised smoothing's DnCNN."""

from rsbench.methods.card import MethodCard

CARD = MethodCard(
    name="denoiser",
    target="rsbench.methods.denoiser.DenoiserTraining",
    paper="Salman, Sun, Yang, Kapoor and Kolter, NeurIPS 2020",
    title="Denoised",
    repository="microsoft/denoised-smoothing",
    lora_refusal="it trains a denoiser in front of a frozen classifier, not the classifier",
    checkpoint_arguments=("classifier_ckpt", "init_ckpt"),
    prerequisites=(
        "a trained classifier to freeze behind the denoiser: method.classifier_ckpt (e.g. a method=standard run); "
        "MSE+Stab starts from the MSE run's checkpoint (method.init_ckpt)"
    ),
)
