"""Synthesizers: a prompt's text → speech. espeak-ng is the offline default."""

from helios.toolcalls.synthesizers.espeak import EspeakSynthesizer, SynthesisError
from helios.toolcalls.synthesizers.google import GoogleSynthesizer
from helios.toolcalls.synthesizers.openai import OpenAISynthesizer

__all__ = ["EspeakSynthesizer", "GoogleSynthesizer", "OpenAISynthesizer", "SynthesisError"]
