"""spark-submit entry point for the stream app on a real Spark cluster.

    spark-submit --master spark://HOST:7077 \
      --jars "$(ls ~/.cache/kmon/jars/spark-kafka/*.jar | paste -sd,)" \
      --py-files kmon-py.zip streaming/submit.py --bootstrap-servers BROKERS [kmon stream flags]

Flags are those of ``kmon stream``; the master is the one spark-submit was given.
"""
import sys

from streaming.cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
