"""SQS endpoint tests: real boto3 against a real server on 127.0.0.1."""
