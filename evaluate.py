"""python evaluate.py ref=NAME target=NAME ... : directional STIR and friends (coming with issue 5)."""
import sys

if __name__ == "__main__":
    sys.exit("evaluate.py arrives with the evaluation issue (#5); the library parts (stir.similarity, stir.inversion) are usable now")
