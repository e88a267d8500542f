"""The card of standard training (:mod:`rsbench.methods.standard`): no noise, the classifier denoised smoothing uses."""

from rsbench.methods.card import MethodCard

CARD = MethodCard(
    name="standard",
    target="rsbench.methods.standard.StandardTraining",
    paper="no paper: cross-entropy on clean images",
    title="Standard",
)
